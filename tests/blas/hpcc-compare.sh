#!/usr/bin/env bash
# HPC Challenge (hpcc, one process) over several BLAS libraries in turn, round after round
# (A B C A B C ...: every library sees the same minutes of a shared machine), each run's hpcc
# output kept, and a summary of HPL, StarDGEMM and SingleDGEMM per library (best and median)
# with each one's ratio to the first library's. Used for issue 30's acceptance 4 on this
# machine (docs/blas.md) and, with NVBLAS, by scripts/build-on-gpu.sh (acceptance 8).
#
#   usage: hpcc-compare.sh OUT_DIR ROUNDS N NAME=LIB [NAME=LIB...]
#     N:   HPL's matrix order (hpcc sizes its DGEMM from the same memory: N = 2000 gives 1154)
#     LIB: a folder holding a libblas.so.3, put first on LD_LIBRARY_PATH (OpenBLAS's, Loom's);
#          or preload:FILE, a library LD_PRELOADed over the system's BLAS (NVBLAS's libnvblas.so,
#          configured by NVBLAS_CONFIG_FILE)
#   HPCC: the program (default: hpcc on PATH). Exits 77 where it is missing.
set -u
out=$1 rounds=$2 n=$3
shift 3
hpcc=${HPCC:-$(command -v hpcc || true)}
if [ -z "$hpcc" ] || [ ! -x "$hpcc" ]; then
  echo "hpcc-compare: no hpcc program (Debian's hpcc package, or HPCC=FILE): skipped"
  exit 77
fi
mkdir -p "$out" && cd "$out" || exit 1
# hpcc's example input with one HPL size, NB = 80, P = Q = 1 (one process).
cat > hpccinf.txt <<EOT
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
$n         Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
1            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
EOT

names=()
failed=0
for ((r = 1; r <= rounds; r++)); do
  for spec in "$@"; do
    name=${spec%%=*} lib=${spec#*=}
    [ "$r" = 1 ] && names+=("$name")
    rm -f hpccoutf.txt
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [[ $lib == preload:* ]]; then
      LD_PRELOAD=${lib#preload:} "$hpcc" > /dev/null 2> "$name-$r.err"
    else
      LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$hpcc" > /dev/null 2> "$name-$r.err"
    fi
    rc=$?
    mv -f hpccoutf.txt "$name-$r.txt" 2> /dev/null || : > "$name-$r.txt"
    line=$(grep -E '^(Success|HPL_Tflops|StarDGEMM_Gflops|SingleDGEMM_Gflops|DGEMM_N)=' "$name-$r.txt" | tr '\n' ' ')
    echo "round $r $name: exit $rc, load $load, $line"
    grep -q '^Success=1' "$name-$r.txt" && [ "$rc" = 0 ] || failed=1
  done
done

# best and median of each figure per library, and the ratios to the first library's
summary() {
  local key=$1 scale=$2
  for name in "${names[@]}"; do
    grep -h "^$key=" "$name"-*.txt | cut -d= -f2 | sort -g |
      awk -v n="$name" -v k="$key" -v s="$scale" '{v[NR] = $1 * s} END {
        if (NR) printf "%s %s %.2f %.2f\n", k, n, v[NR], v[int((NR + 1) / 2)] }'
  done
}
{ summary HPL_Tflops 1000; summary StarDGEMM_Gflops 1; summary SingleDGEMM_Gflops 1; } > summary.txt
echo "GFLOP/s over $rounds rounds (best, median; ratio to ${names[0]}'s):"
awk '{ if (!($1 in first)) { first[$1] = $3; firstm[$1] = $4 }
       label = $1; sub(/_.*/, "", label)
       printf "  %-11s %-10s best %8.2f  median %8.2f  ratio best %.3f  median %.3f\n",
              label, $2, $3, $4, $3 / first[$1], $4 / firstm[$1] }' summary.txt
exit $failed
