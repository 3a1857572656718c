#!/usr/bin/env bash
# ncu_probe.sh [--stalls] [SHAPE]: one device call from a staged archive (kernels/dev/stage.sh ->
# .gpuwork/stage.tgz): the attention parity tests, then Nsight Compute (clocks left alone) on one
# launch each of the softmax forward / backward and the PaTH forward / backward kernels at SHAPE
# (default 8x2048x16x64). Default: speed of light, warp state, occupancy, memory and launch
# sections. --stalls: the per-reason warp stalls, shared-memory wavefronts / bank conflicts,
# tensor-pipe activity, the ALU / FMA / XU pipes, issue activity and atomic (red) sectors instead,
# one line per kernel.
set -u
stalls=0; [ "${1:-}" = --stalls ] && { stalls=1; shift; }
shape=${1:-8x2048x16x64}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/stage && tar xf .gpuwork/stage.tgz -C /tmp/stage && cd /tmp/stage/bin
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
timeout 200 ./test_cuda_attention > "$OUT/test.log" 2>&1
echo "test_cuda_attention rc=$? $(grep -c '^\[       OK' "$OUT/test.log") ok"; grep -E "FAILED|Failure" "$OUT/test.log" | head
metrics='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,gpu__time_duration.sum'
if [ $stalls = 1 ]; then what=(--metrics "$metrics"); else
  what=(--section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis
        --section ComputeWorkloadAnalysis --section LaunchStats); fi
# (softmax in bf16 at Dh 64 / 128 on an H100 runs the wgmma kernels; the regexes match either)
for kk in "softmax:attn_fwd_kernel|softmax_fwd_wgmma" "softmax:softmax_bwd_kv_kernel|softmax_bwd_wgmma" \
          path:attn_fwd_kernel path:path_bwd_kernel; do
  kind=${kk%%:*} k=${kk#*:} log="$OUT/ncu_${kind}_${k%%|*}.txt"
  timeout 150 ncu --clock-control none -k "regex:($k)" --launch-skip 1 --launch-count 1 "${what[@]}" \
    ./statebench bench attention --kind "$kind" --reps 1 --shapes "$shape" > "$log" 2>&1
  echo "== ncu $kind $k rc=$?"
  if [ $stalls = 1 ]; then
    grep -E "^\s+(smsp|l1tex|sm__|lts|gpu__)" "$log" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' |
      awk '{print $1, $NF}' | awk '$2+0 > 0.05 || /sum|pct/' | tr '\n' ';'; echo
  else
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit" "$log" | head -20
  fi
done
