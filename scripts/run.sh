#!/usr/bin/env bash
# run.sh: the README's main-job command. Installs missing packages, builds statebench, then runs
# the quickstart: generates examples of every built-in task and benchmarks the generators.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATEBENCH_CUDA="${STATEBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target statebench
SB="$BUILD_DIR/statebench"
"$SB" tasks
"$SB" tasks show word_problem --param group=A4xZ5 --param length=8 | head -n 30
mkdir -p out
"$SB" generate flipflop --param length=64 -n 1000 -o out/flipflop.jsonl
"$SB" generate word_problem --param group=S5 --param length=32 --split val -n 1000 -o out/s5_val.npy
"$SB" bench tasks --seconds 0.5
