#!/usr/bin/env bash
# run.sh: the README's main-job command. Installs missing packages, builds statebench, then runs
# the quickstart study (experiments/quickstart.yaml: PaTH vs RoPE, minimum depth to solve running
# parity) on the CPU (on the GPU when the build has CUDA and one is present) and prints its table.
# Re-running resumes: finished cells are reused.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/quickstart}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATEBENCH_CUDA="${STATEBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target statebench
SB="$BUILD_DIR/statebench"
"$SB" sweep experiments/quickstart.yaml --out "$OUT"
"$SB" table "$OUT"
