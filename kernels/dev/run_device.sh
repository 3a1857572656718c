#!/usr/bin/env bash
# run_device.sh: what one device call runs from a staged folder (see kernels/NOTES.md, "Device
# runs"): prebuilt statebench + test_cuda_attention (built on the CPU box with nvcc, carried with
# their non-system libraries in lib/), the parity tests, the SDPA reference and our benchmark.
# Usage: run_device.sh [tests|bench|all|sanitize] ; writes logs to $OUT (or ./out).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-./out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader
missing=$(ldd ./statebench ./test_cuda_attention | grep "not found" | sort -u)
[ -n "$missing" ] && echo "MISSING LIBS: $missing"
if [[ $what == tests || $what == all ]]; then
  timeout 300 ./test_cuda_attention > "$OUT/test.log" 2>&1
  echo "test rc=$?"
  grep -E "^(PaTH|softmax|mma|reference)|Failure|FAILED|error|PASSED|Expected|Which is|relative error|actual" "$OUT/test.log" | head -120
fi
if [[ $what == bench || $what == all ]]; then
  timeout 120 python3 ../tools/sdpa_bench.py --json "$OUT/sdpa.json" --reps 20 > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?"; cat "$OUT/sdpa.log" | tail -9
  timeout 200 ./statebench bench attention --reps 10 --sdpa "$OUT/sdpa.json" --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"; tail -16 "$OUT/bench.log"
fi
if [[ $what == sanitize ]]; then
  timeout 200 compute-sanitizer --tool memcheck --print-limit 20 ./test_cuda_attention \
    --gtest_filter='*Mma*:*PathBf16*:*SoftmaxFp32*' > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|out of bounds|FAILED|PASSED" "$OUT/memcheck.log" | head -30
fi
