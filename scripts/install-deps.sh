#!/usr/bin/env bash
# Installs the Debian packages Loom builds and tests against, and only those that are missing.
# Safe to run again: when everything is present it does nothing and needs no root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libclblast-dev libclfft-dev
  libhwloc-dev libopenblas-dev libopenblas-openmp-dev libfftw3-dev
  clang libclang-rt-dev clang-format
  gfortran
  openmpi-bin libopenmpi-dev
  libudev-dev # pkg-config --static --libs loom: hwloc.pc names -ludev
  libprotobuf-c-dev protobuf-c-compiler libonnx-testdata python3-onnx
  help2man man-db # the tools' man pages (cmake/man.cmake) and `man` to read them
  libblas-test liblapack-test liblapack3 hpcc # libblas.so.3's judges (tests/blas.cmake, docs/blas.md)
  python3-pytest python3-scipy # NumPy's and SciPy's linalg tests over libblas.so.3 (docs/blas.md)
  python3-numpy # examples/limits/inputs.py writes .npy inputs for the kernels of issue 34
  valgrind # tests/planning_scale.cmake counts the instructions planning takes
  python3-faiss # loom-bench knn times FAISS IndexFlatL2 beside Loom (issue 35)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "install-deps: not root and no password-less sudo. Run as root:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
# apt-get update only when the package lists cannot resolve what we need.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" </dev/null; then
  $SUDO apt-get update </dev/null
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
fi
echo "install-deps: installed ${missing[*]}"
