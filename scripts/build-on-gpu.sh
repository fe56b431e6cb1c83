#!/bin/bash
# Builds Loom (cpu + cuda backends, no OpenCL) on a machine without Debian's -dev packages, from
# the .debs in .debs/ (hwloc, OpenBLAS (OpenMP), FFTW: `apt-get download`ed on a Debian
# 12 machine), then runs the cuda tests and `loom-bench cuda`. Run from the repository's root.
# Results land in $OUT (the device tool's folder) when it is set, else in /tmp/loom-out.
set -u
OUT=${OUT:-/tmp/loom-out}
mkdir -p "$OUT"
P=/tmp/loom-prefix
B=${LOOM_BUILD:-/tmp/loom-build}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
mkdir -p $P && for f in .debs/*.deb; do dpkg -x "$f" $P; done
L=$P/usr/lib/x86_64-linux-gnu
# Debian's .pc files say prefix=/usr: point them at the prefix.
find $P -name '*.pc' -exec sed -i "s#^prefix=/usr\$#prefix=$P/usr#" {} +
export PKG_CONFIG_PATH=$L/openblas-openmp/pkgconfig:$L/pkgconfig
export LIBRARY_PATH=$L:$L/openblas-openmp
export LD_LIBRARY_PATH=$L:$L/openblas-openmp:${LD_LIBRARY_PATH:-}
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_OPENCL=OFF -DLOOM_CUDA=ON 2>&1 | tee "$OUT/configure.txt" | grep -E "Loom|Error|error" 
( time cmake --build $B -j"$(nproc)" ) > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
tail -3 "$OUT/build.txt"
cd $B
./loom-info > "$OUT/loom-info.txt" 2>&1; tail -8 "$OUT/loom-info.txt"
ctest -R '^(conformance\.)?cuda' --output-on-failure -j4 > "$OUT/ctest-cuda.txt" 2>&1; tail -40 "$OUT/ctest-cuda.txt"
./loom-bench cuda --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
LOOM_CUDA_STAGING=0 ./loom-bench cuda --reps 3 > "$OUT/bench-nostaging.txt" 2>&1; tail -8 "$OUT/bench-nostaging.txt"
