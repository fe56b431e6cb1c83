#!/bin/bash
# The GPU proof: builds Loom (cpu + cuda backends, and opencl where the machine's NVIDIA driver
# has an OpenCL library) on a machine without Debian's -dev packages, from the .debs in .debs/
# (hwloc, OpenBLAS (OpenMP), FFTW, the OpenCL loader and headers, CLBlast, clFFT: fetched on a
# Debian 12 machine by scripts/fetch-gpu-debs.sh), then runs, in this order, each step under
# its own time limit so that a slow one cannot hide the rest:
#   loom-info; the cuda tests (conformance.cuda, cuda.*: every example on cuda0 and under a
#   memory limit); loom-bench cuda (Loom vs cuBLAS/cuFFT); loom-bench kmv on cuda0 (fused
#   kernels through NVRTC vs unfused); loom-bench suite --quick on cuda0; the rest of the
#   tests (the opencl ones on the NVIDIA OpenCL device); loom-bench opencl.
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
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
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
step ctest-cuda 240 ctest -R '^(conformance\.)?cuda' --output-on-failure -j4 --timeout 200
step bench-cuda 120 ./loom-bench cuda --json "$OUT/bench-cuda.json"
step bench-kmv 120 ./loom-bench kmv --device cuda0 --n 10000,100000,1000000 --unfused-max 100000 --repeats 3
step bench-suite 120 ./loom-bench suite --quick --devices cpu0,cuda0 --json "$OUT/suite.json"
# The rest of the suite; the opencl tests run on the NVIDIA OpenCL device where there is one.
step ctest-rest 200 ctest -E '^(conformance\.)?cuda' -j"$NPROC" --timeout 150 --output-on-failure
[ -n "$OCL" ] && step bench-opencl 90 ./loom-bench opencl
grep -E "^==== .*: rc" "$LOG"
