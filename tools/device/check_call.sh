#!/usr/bin/env bash
# check_call.sh: one call on a lent GPU machine (the `device` tool): builds everything there,
# runs the whole test suite (the CUDA parity tests must pass, not skip), then times training:
# `statebench bench train --device cuda` at tf32 and bf16, with and without CUDA graphs, and the
# PyTorch eager script on the same models. Logs under $OUT.
#   tools/device/check_call.sh [BENCH_SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
secs=${1:-3}
commit=$(cat .gpuwork/COMMIT 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSTATEBENCH_COMMIT="$commit" > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
/usr/bin/time -f "build %e s" cmake --build build-gpu -j16 > "$OUT/build.log" 2>&1 || { grep -B2 -A8 "error" "$OUT/build.log" | head -60; exit 1; }
tail -1 "$OUT/build.log"
ctest --test-dir build-gpu -j8 --timeout 300 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*|Not Run" "$OUT/ctest.log" | head -20
for t in test_cuda_ops test_cuda_model test_cuda_attention; do
  build-gpu/tests/$t > "$OUT/$t.log" 2>&1; echo "$t rc=$? $(grep -cE '^\[       OK \]' "$OUT/$t.log") ok $(grep -cE '^\[  SKIPPED \]' "$OUT/$t.log") skipped"
  grep -E "^\[  FAILED|Failure|error" "$OUT/$t.log" | head -8
done
for prec in tf32 bf16; do
  for graphs in true false; do
    echo "== bench train --precision $prec cuda_graphs=$graphs"
    build-gpu/statebench bench train --device cuda --precision $prec --seconds "$secs" --set train.cuda_graphs=$graphs \
      --json "$OUT/bench_train_${prec}_g$graphs.json" 2>&1 | tail -4
  done
done
for preset in flipflop_ref wordproblem_128; do
  for dt in tf32 bf16; do
    python3 tools/torch_train_bench.py --preset $preset --device cuda --dtype $dt --steps 50 \
      > "$OUT/torch_${preset}_$dt.log" 2>&1; echo "torch $preset $dt: $(tail -1 "$OUT/torch_${preset}_$dt.log")"
  done
done
