# loom-bench fusion --suite (tools/loom-bench/bench_fusion_suite.c): every case of the suite and the
# graphs the fuse rewrite fuses, planned with fuse on and off on cpu0. At --tiny sizes the times
# mean nothing and only a failure or a fused result unlike the unfused one fails the run; the
# figures are docs/ir-fusion.md's.
loom_bench_test(fusion_suite_tiny ARGS fusion --suite --tiny --rounds 1
  STDOUT_REGEX "chain +2000 adds f32\\[16\\] +[1-9][0-9]* .*kmv +d=3 +[1-9].* 0 failed\n$")
loom_bench_test(fusion_suite_bad_rounds RC 2 ARGS fusion --suite --rounds 0
  STDERR_REGEX "^loom-bench fusion --suite: --rounds '0': want a count from 1 to 64\n$")
loom_bench_test(fusion_suite_unknown_option RC 2 ARGS fusion --suite --bogus
  STDERR_REGEX "^loom-bench fusion --suite: unknown option '--bogus'\nusage: loom-bench fusion --suite")
