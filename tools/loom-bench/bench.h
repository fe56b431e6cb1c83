/* loom-bench: one function per mode; main.c picks the mode from the first argument. */
#ifndef LOOM_BENCH_H
#define LOOM_BENCH_H

/* Each returns the process's exit code: 0 done, 1 failed, 2 bad command line. argv[0] is the
 * mode's name. */
int loom_bench_cpu(int argc, char **argv);
int loom_bench_dot(int argc, char **argv);
int loom_bench_hmm(int argc, char **argv);
int loom_bench_knn(int argc, char **argv);
int loom_bench_kmv(int argc, char **argv);
int loom_bench_opencl(int argc, char **argv);
int loom_bench_overhead(int argc, char **argv);
int loom_bench_cuda(int argc, char **argv);

/* Seconds on a monotonic clock (main.c). */
double bench_now(void);

#endif
