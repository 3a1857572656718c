#!/usr/bin/env bash
# run.sh: the README's main-job command. Installs missing packages, builds statebench in build/
# (shared with scripts/test.sh), then runs the quickstart study (experiments/quickstart.yaml: PaTH
# vs RoPE, minimum depth to solve running parity) on the CPU, or on the GPU when one is present,
# and prints its table. Re-running resumes: finished cells are reused. It builds the command,
# build/statebench, and the example plugin, build/plugins/libstatebench_example_plugin.so;
# `cmake --install build --prefix ~/.local` copies them to ~/.local/bin and ~/.local/lib/statebench/plugins.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/quickstart}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATEBENCH_CUDA="${STATEBENCH_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target statebench statebench_example_plugin
SB="$BUILD_DIR/statebench"
WHERE=()
if "$SB" --version | grep -q '+cuda' && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  WHERE=(--devices cuda:0 --set train.device=cuda)
fi
"$SB" sweep experiments/quickstart.yaml --out "$OUT" "${WHERE[@]}"
"$SB" table "$OUT"
echo
echo "statebench is $BUILD_DIR/statebench (the example plugin: $BUILD_DIR/plugins/libstatebench_example_plugin.so)."
echo "To type 'statebench' anywhere: cmake --install $BUILD_DIR --prefix ~/.local   (with ~/.local/bin on your PATH)"
