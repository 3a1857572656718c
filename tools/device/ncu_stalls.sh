mkdir -p /tmp/stage && tar xzf .gpuwork/stage.tgz -C /tmp/stage && cd /tmp/stage/bin && export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,gpu__time_duration.sum'
for kk in softmax:attn_fwd_kernel softmax:softmax_bwd_kv_kernel path:path_bwd_kernel; do
  kind=${kk%%:*} k=${kk#*:}
  timeout 150 ncu --clock-control none -k "regex:$k" --launch-skip 1 --launch-count 1 --metrics "$M" ./statebench bench attention --kind $kind --reps 1 --shapes 8x2048x16x64 > $OUT/m_$k.txt 2>&1
  echo "== $kind $k"; grep -E "^\s+(smsp|l1tex|sm__|lts|gpu__)" $OUT/m_$k.txt | awk '$NF+0 > 0.05 || /sum|pct/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $NF}' | tr '\n' ';'; echo
done
