#!/usr/bin/env bash
# run_device.sh: what one device call runs from a staged folder (kernels/dev/stage.sh): prebuilt
# statebench + test_cuda_* (built on the CPU box with nvcc, carried with their non-system libraries
# in lib/), the attention parity tests, the other CUDA tests, a per-step profile, the SDPA reference
# and our benchmark.
# Usage: run_device.sh [tests] [unit] [profile] [sdpa] [bench] [sanitize]; logs go to $OUT (or ./out).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-./out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader
missing=$(ldd ./statebench ./test_cuda_attention | grep "not found" | sort -u)
[ -n "$missing" ] && echo "MISSING LIBS: $missing"
sdpa=../tools/sdpa.json
for what in "$@"; do
  case $what in
    tests)
      timeout 300 ./test_cuda_attention > "$OUT/test.log" 2>&1
      echo "test rc=$?"
      grep -E "^(PaTH|softmax|mma|wgmma|reference)|Failure|FAILED|OK \]|Which is|relative error|actual" "$OUT/test.log" | cut -c1-230 | head -150 ;;
    unit)
      for t in test_cuda_ops test_cuda_ops_bf16 test_cuda_model; do
        timeout 300 ./$t > "$OUT/$t.log" 2>&1
        echo "$t rc=$? $(grep -cE '^\[       OK \]' "$OUT/$t.log") ok $(grep -cE '^\[  SKIPPED \]' "$OUT/$t.log") skipped"
        grep -E "^\[  FAILED|Failure" "$OUT/$t.log" | head -8
      done ;;
    profile)
      for s in 8x2048x16x64 128x256x8x64 2x8192x16x128; do
        timeout 60 ./statebench bench attention --profile --reps 1 --shapes $s > "$OUT/prof_$s.log" 2>&1
        grep "attn profile" "$OUT/prof_$s.log" | tail -4 | sed "s/^/$s /" | cut -c1-250
      done ;;
    sdpa)
      timeout 120 python3 ../tools/sdpa_bench.py --json "$OUT/sdpa.json" --reps 20 > "$OUT/sdpa.log" 2>&1
      echo "sdpa rc=$?"; tail -8 "$OUT/sdpa.log"; sdpa=$OUT/sdpa.json ;;
    bench)
      timeout 240 ./statebench bench attention --reps 10 --sdpa "$sdpa" --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"; tail -15 "$OUT/bench.log" ;;
    sanitize)
      timeout 200 compute-sanitizer --tool memcheck --print-limit 20 ./test_cuda_attention \
        --gtest_filter='*Mma*:*PathBf16*:*SoftmaxFp32*' > "$OUT/memcheck.log" 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|out of bounds|FAILED|PASSED" "$OUT/memcheck.log" | head -30 ;;
  esac
done
