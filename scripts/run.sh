#!/usr/bin/env bash
# run.sh: the README's main-job command. Installs missing packages, builds statebench in build/
# (shared with scripts/test.sh), then runs the quickstart study (experiments/quickstart.yaml: PaTH
# vs RoPE, minimum depth to solve running parity) on the CPU, or on the GPU when one is present,
# and prints its table. Re-running resumes: finished cells are reused.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/quickstart}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATEBENCH_CUDA="${STATEBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target statebench
SB="$BUILD_DIR/statebench"
WHERE=()
if "$SB" --version | grep -q '+cuda' && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  WHERE=(--devices cuda:0 --set train.device=cuda)
fi
"$SB" sweep experiments/quickstart.yaml --out "$OUT" "${WHERE[@]}"
"$SB" table "$OUT"
