#!/usr/bin/env bash
# test.sh: the README's test command. Installs missing packages, builds statebench and its tests in
# build/ (the directory scripts/run.sh uses too; CUDA where a GPU is present, or with
# STATEBENCH_CUDA=ON wherever nvcc is; STATEBENCH_CUDA=OFF forces a CPU-only build; CUDA_ARCHITECTURES
# sets CMAKE_CUDA_ARCHITECTURES), runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATEBENCH_CUDA="${STATEBENCH_CUDA:-AUTO}" \
  ${CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHITECTURES"} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
