#!/usr/bin/env bash
# eval_memory.sh: device memory of one training cell with and without evaluations at longer lengths
# (the s5_swaps_length cell shape: L = 128, batch 1024, PaTH, 2 layers; 260 steps, one evaluation at
# step 250). Prints the process's peak `nvidia-smi` memory for each; the difference is what the
# evaluation runner holds. Usage: SB=/path/to/statebench tools/device/eval_memory.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
SB=${SB:-build/statebench}
for evals in "[{split: val}]" "[{split: val}, {split: val, length: 256}, {split: val, length: 512}]"; do
  out=$(mktemp -d)
  $SB train experiments/configs/word_problem_short.yaml --set task.params.group=experiments/groups/s5_swaps.yaml \
    --set task.params.inputs=generators --set task.params.length=128 --set model.attention=path \
    --set model.n_layers=2 --set train.steps=260 --set train.eval_every=250 --set train.device=cuda \
    --set train.precision=tf32 --set "task.eval=$evals" --out "$out/run" --device cuda:0 > "$out/log" 2>&1 &
  pid=$! peak=0
  while kill -0 $pid 2> /dev/null; do
    m=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p=$pid '$1 == p {print $2}')
    [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m
    sleep 0.2
  done
  wait $pid; rc=$?
  echo "evals $evals: exit $rc, peak $peak MiB; $(grep -o 'val[@0-9]* [0-9.]*' "$out/log" | tail -3 | tr '\n' ' ')"
  rm -rf "$out"
done
