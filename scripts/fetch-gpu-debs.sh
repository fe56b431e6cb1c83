#!/bin/bash
# Downloads, on a Debian 12 machine, the .debs scripts/build-on-gpu.sh unpacks on a GPU machine
# that lacks Debian's -dev packages (the device tool's machines: no package registry there).
# .debs/ is ignored by git; the device tool carries it (`carry: [".debs"]`).
set -eu
mkdir -p .debs
cd .debs
apt-get download libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev libfftw3-dev \
  libfftw3-single3 libfftw3-double3 libfftw3-long3 libhwloc-dev libhwloc15 libgfortran5 \
  libquadmath0 ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers \
  libclblast1 libclblast-dev libclfft2 libclfft-dev
