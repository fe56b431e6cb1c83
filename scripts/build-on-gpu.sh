#!/bin/bash
# The GPU proof: builds Loom (cpu + cuda backends, and opencl where the machine's NVIDIA driver
# has an OpenCL library) on a machine without Debian's -dev packages, from the .debs in .debs/
# (hwloc, OpenBLAS (OpenMP), FFTW, the OpenCL loader and headers, CLBlast, clFFT: fetched on a
# Debian 12 machine by scripts/fetch-gpu-debs.sh), then runs, in this order, each step under
# its own time limit so that a slow one cannot hide the rest:
#   loom-info; the cuda tests (conformance.cuda, cuda.*: every example on cuda0 and under a
#   memory limit); loom-bench cuda (Loom vs cuBLAS/cuFFT); loom-bench kmv on cuda0 (fused
#   kernels through NVRTC vs unfused); loom-bench suite --quick on cuda0; the rest of the
#   calibrate and the shared runs on cpu0 + cuda0 (issue 15); hpcc's DGEMM through Loom's
#   libblas.so.3, NVBLAS and OpenBLAS (issue 30); the rest of the tests (the opencl
#   ones on the NVIDIA OpenCL device); loom-bench opencl.
# Run from the repository's root. Everything lands in $OUT (the device tool's folder) when it
# is set, else in /tmp/loom-out: log.txt (every step, with its time and exit status) and the
# benchmarks' JSON.
set -u
OUT=${OUT:-/tmp/loom-out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
: > "$LOG"
SRC=$PWD
P=/tmp/loom-prefix
B=${LOOM_BUILD:-/tmp/loom-build}
NPROC=$(nproc)

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output appended to the log.
# LOOM_GPU_STEPS="bench-kmv bench-kmv-1e6" runs only those steps after the build.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  case "$name" in gpu | os | configure | build) ;; *)
    if [ -n "${LOOM_GPU_STEPS:-}" ] && [[ " $LOOM_GPU_STEPS " != *" $name "* ]]; then return 0; fi ;;
  esac
  echo "==== $name (limit ${limit}s)" >> "$LOG"
  timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  echo "==== $name: rc $rc, $((SECONDS - t0)) s" | tee -a "$LOG"
  return $rc
}

step gpu 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
step os 5 sh -c 'grep PRETTY /etc/os-release; gcc --version | head -1; cmake --version | head -1; nvcc --version | tail -1'

mkdir -p $P && for f in .debs/*.deb; do dpkg -x "$f" $P; done
L=$P/usr/lib/x86_64-linux-gnu
# Debian's .pc files name /usr (prefix=, and OpenBLAS's libdir= and includedir=): point them at the prefix.
find $P -name "*.pc" -exec sed -i -E "s#^([A-Za-z_]+)=/usr(/|\$)#\1=$P/usr\2#" {} +
export PKG_CONFIG_PATH=$L/openblas-openmp/pkgconfig:$L/pkgconfig
export LIBRARY_PATH=$L:$L/openblas-openmp
export LD_LIBRARY_PATH=$L:$L/openblas-openmp:${LD_LIBRARY_PATH:-}
export CMAKE_PREFIX_PATH=$P/usr

# The NVIDIA driver ships its OpenCL library without an ICD file in most containers: point the
# loader at it directly.
OCL=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so/ {print $NF; exit}')
[ -n "$OCL" ] || OCL=$(find /usr/lib /usr/lib64 /usr/local/nvidia /usr/lib/x86_64-linux-gnu \
  -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
if [ -n "$OCL" ]; then
  mkdir -p /tmp/icd && echo "$OCL" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
  echo "OpenCL: $OCL" | tee -a "$LOG"
  OPENCL=AUTO
else
  echo "OpenCL: the driver has no libnvidia-opencl; opencl not built" | tee -a "$LOG"
  OPENCL=OFF
fi

configure() {
  step configure 120 cmake -S "$SRC" -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_OPENCL=$1 -DLOOM_CUDA=ON
}
build() { step build 300 cmake --build $B -j"$NPROC"; }
if ! { configure $OPENCL && build; }; then
  [ $OPENCL = OFF ] && { tail -60 "$LOG"; exit 1; }
  echo "retrying without opencl" | tee -a "$LOG"
  rm -rf $B
  { configure OFF && build; } || { tail -60 "$LOG"; exit 1; }
fi
grep -E "^-- Loom" "$LOG" | tee "$OUT/configure.txt"

cd $B
step loom-info 30 ./loom-info
step ctest-cuda 180 ctest -R '^(conformance\.)?cuda|^interop\.cuda' --output-on-failure -j4 --timeout 150
step bench-cuda 60 ./loom-bench cuda --json "$OUT/bench-cuda.json"
LOOM_CUDA_STAGING=0 step bench-cuda-nostaging 60 ./loom-bench cuda --reps 3
step bench-kmv 75 ./loom-bench kmv --device cuda0 --n 10000,100000 --unfused-max 10000 --repeats 3
step bench-kmv-1e6 60 ./loom-bench kmv --device cuda0 --n 1000000 --unfused-max 1 --repeats 1
# The fused kernel's two layouts for reductions (docs/cuda.md, LOOM_CUDA_FUSED_LAYOUT), forced.
LOOM_CUDA_FUSED_LAYOUT=group step bench-kmv-group 60 ./loom-bench kmv --device cuda0 --n 100000,1000000 --unfused-max 1 --repeats 1
LOOM_CUDA_FUSED_LAYOUT=item step bench-kmv-item 60 ./loom-bench kmv --device cuda0 --n 100000,1000000 --unfused-max 1 --repeats 1
step bench-suite 60 ./loom-bench suite --quick --devices cpu0,cuda0 --json "$OUT/suite.json" --plot "$OUT/suite.svg"
# Where the time of an end-to-end run on cuda0 goes: the memory manager's trace (copies,
# allocations, stages) of a large SGEMM and of a small reduction.
printf 'graph sgemm(a: f32[8192,8192], b: f32[8192,8192]) {\n  c = dot a b\n  return c\n}\n' > sgemm.lir
printf 'graph red(x: f32[1048576]) {\n  s = reduce_sum x axes=[0]\n  return s\n}\n' > red.lir
step trace-sgemm 60 ./loom-run sgemm.lir --random 1 --runners cuda0:4GiB --trace "$OUT/trace-sgemm.json"
step trace-reduce 30 ./loom-run red.lir --random 1 --runners cuda0:64MiB --trace "$OUT/trace-reduce.json"
# Issue 15's third point: cpu0 + cuda0 against cuda0 alone. Both devices' models first (dmda
# places stages and ranges by them), then the two towers (independent stages: where dmda puts
# each, and why, from the models loom-info prints) and kNN's loop shared (loom-bench share's
# ratios). Only these: LOOM_GPU_STEPS="calibrate models platform predict share-towers
# share-gpu-host share-knn".
step calibrate 120 ./loom-bench calibrate --devices cpu0,cuda0 --reps 2
step models 10 ./loom-info --models
# This machine as a platform file (kept: later sessions simulate it without a GPU), and what
# the models predict for the runs below (docs/sched.md, "--simulate here").
step platform 10 sh -c "LOOM_DEVICES=cpu0,cuda0 ./loom-info --platform > $OUT/platform.json"
step predict 30 sh -c "for d in cuda0 cpu0,cuda0; do for g in towers gpu_and_host knn_400k; do ./loom-run $SRC/examples/\$g.lir --simulate here --devices \$d; done; done"
step share-towers 90 sh -c "for d in cuda0 cpu0,cuda0; do for p in dmda eager; do ./loom-run $SRC/examples/towers.lir --random 1 --devices \$d --policy \$p; done; done"
# A branch for each device (a 4096^3 product, the sum of a 4 GiB matrix on the host): where the
# host should help the GPU (docs/sched.md, "Where the host helps a GPU"; predicted 2.06x on the
# H200 of docs/cuda.md).
step share-gpu-host 120 sh -c "for d in cuda0 cpu0,cuda0; do ./loom-run $SRC/examples/gpu_and_host.lir --random 1 --devices \$d; done"
step share-knn 120 ./loom-bench share --devices cuda0,cpu0 --n 200000 --m 200000 --repeats 3 --no-auto
# Issue 30's eighth point: hpcc's DGEMM with host operands through Loom's libblas.so.3, NVBLAS
# (the toolkit's libnvblas.so, preloaded, OpenBLAS as its CPU library) and OpenBLAS, one run
# each at N = 10000 (DGEMM n = 5773; tests/blas/hpcc-compare.sh; predicted by `loom-bench blas
# --simulate`, docs/blas.md). Loom places the calls by the models of the calibrate step above.
# hpcc is Debian's (its .deb in .debs/, or on PATH); without it, the same dgemm through
# loom-bench blas, Loom's and NVBLAS's each against OpenBLAS. Only this:
# LOOM_GPU_STEPS="calibrate hpcc-dgemm".
NVBLAS=$(ls /usr/local/cuda/lib64/libnvblas.so* /usr/local/cuda/targets/x86_64-linux/lib/libnvblas.so* \
  2>/dev/null | head -1)
HPCC_BIN=$(command -v hpcc || ls $P/usr/bin/hpcc 2>/dev/null || true)
if [ -n "$NVBLAS" ]; then
  printf 'NVBLAS_CPU_BLAS_LIB %s\nNVBLAS_GPU_LIST ALL\nNVBLAS_LOGFILE %s/nvblas.log\n' \
    "$L/openblas-openmp/libopenblas.so.0" "$OUT" > "$OUT/nvblas.conf"
  export NVBLAS_CONFIG_FILE=$OUT/nvblas.conf
fi
if [ -n "$HPCC_BIN" ]; then
  step hpcc-dgemm 300 env HPCC="$HPCC_BIN" "$SRC/tests/blas/hpcc-compare.sh" "$OUT/hpcc" 1 10000 \
    openblas=$L/openblas-openmp loom=$B/blas ${NVBLAS:+nvblas=preload:$NVBLAS}
else
  echo "hpcc-dgemm: no hpcc (add its .deb to .debs/): loom-bench blas's dgemm instead" | tee -a "$LOG"
  step hpcc-dgemm 300 sh -c "./loom-bench blas --devices all --versus host --sizes 4096,8192 --repeat 2 \
    --json $OUT/blas-loom.json; [ -z '$NVBLAS' ] || ./loom-bench blas --shim '$NVBLAS' --devices nvblas \
    --versus host --sizes 4096,8192 --repeat 2 --json $OUT/blas-nvblas.json"
fi
# The rest of the tests, then the opencl ones on the NVIDIA OpenCL device where there is one
# (cases made for PoCL's two devices fail there for want of ocl1).
step ctest-rest 150 ctest -E '^(conformance\.)?cuda|opencl|fusedgpu' -j"$NPROC" --timeout 120 --output-on-failure
[ -n "$OCL" ] && step ctest-opencl 120 ctest -R 'opencl|fusedgpu' -j8 --timeout 100 --output-on-failure
[ -n "$OCL" ] && step bench-opencl 60 ./loom-bench opencl
grep -E "^==== .*: rc" "$LOG"
