#!/usr/bin/env bash
# ncu_probe.sh [SHAPE]: one device call from a staged archive (kernels/dev/stage.sh ->
# .gpuwork/stage.tgz): the attention parity tests, then Nsight Compute (clocks left alone) on one
# launch each of the softmax forward / backward and the PaTH forward / backward kernels at SHAPE
# (default 8x2048x16x64): speed of light, warp stalls, occupancy, memory and launch statistics.
set -u
shape=${1:-8x2048x16x64}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/stage && tar xzf .gpuwork/stage.tgz -C /tmp/stage && cd /tmp/stage/bin
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
timeout 200 ./test_cuda_attention > "$OUT/test.log" 2>&1
echo "test_cuda_attention rc=$? $(grep -c '^\[       OK' "$OUT/test.log") ok"; grep -E "FAILED|Failure" "$OUT/test.log" | head
for kk in softmax:attn_fwd_kernel softmax:softmax_bwd_kv_kernel path:attn_fwd_kernel path:path_bwd_kernel; do
  kind=${kk%%:*} k=${kk#*:}
  timeout 150 ncu --clock-control none -k "regex:$k" --launch-skip 1 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section LaunchStats ./statebench bench attention --kind "$kind" --reps 1 --shapes "$shape" > "$OUT/ncu_${kind}_$k.txt" 2>&1
  echo "ncu $kind $k rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Block Limit" "$OUT/ncu_${kind}_$k.txt" | head -20
done
