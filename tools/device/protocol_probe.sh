#!/usr/bin/env bash
# protocol_probe.sh: runs several single-cell training runs concurrently on one GPU (under CUDA MPS)
# for a fixed time, then prints each run's learning curve (evaluation token accuracy by step) and
# its training rate. Used to choose a study protocol (steps, batch, lr) before a sweep.
#   tools/device/protocol_probe.sh SECONDS CONFIG PROBE_FILE [CONFIG PROBE_FILE ...]
# PROBE_FILE: one run per line, "name --set k=v --set k=v ..."; a line "@common ARGS" adds ARGS to
# every run of that file; # starts a comment. GPUS=N spreads the runs round-robin over N GPUs (one
# MPS daemon serves them all). Logs: $OUT/probe/. SB=PATH picks the binary (default
# build-gpu/statebench; a staged one: SB=/tmp/stage/bin/statebench with its lib/ on LD_LIBRARY_PATH).
# Each run's curve shows token accuracy per evaluation split, or the error rate (err) where the
# task reports one (flip-flop).
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=$1
shift
(( $# >= 2 && $# % 2 == 0 )) || { echo "protocol_probe.sh: give SECONDS and CONFIG PROBE_FILE pairs" >&2; exit 2; }
OUT=${OUT:-/tmp/out}; dir="$OUT/probe"; mkdir -p "$dir"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS on"
names=()
gpus=${GPUS:-1} run=0
while (( $# )); do
  config=$1 probes=$2
  shift 2
  common=$(awk '$1 == "@common" {$1 = ""; print}' "$probes")
  while read -r name args; do
    [[ -z "$name" || "$name" == \#* || "$name" == @common ]] && continue
    names+=("$name")
    rm -rf "/tmp/probe/$name"
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$((run % gpus)) timeout "$secs" "${SB:-build-gpu/statebench}" train "$config" --device cuda \
      --quiet --out "/tmp/probe/$name" $common $args > "$dir/$name.log" 2>&1 &
    run=$((run + 1))
  done < "$probes"
done
wait
echo quit | nvidia-cuda-mps-control
for name in "${names[@]}"; do
  m="/tmp/probe/$name/metrics.jsonl"
  cp "$m" "$dir/$name.metrics.jsonl" 2>/dev/null
  python3 - "$name" "$m" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    rows = [json.loads(l) for l in open(path)]
except OSError:
    print(f"{name}: no metrics"); sys.exit()
def shown(v):  # the error rate where the task reports one (flip-flop), else the token accuracy
    return f"err {v['error_rate']:.4g}" if "error_rate" in v else f"{v['token_accuracy']:.2f}"
ev = [(r["step"], {k: shown(v) for k, v in r["eval"].items()}) for r in rows if r.get("kind") == "eval"]
tr = [r for r in rows if r.get("kind") == "train"]
rate = tr[-1]["tokens_per_s"] if tr else float("nan")
curve = " ".join(f"{s}:{'/'.join(accs.values())}" for s, accs in ev)
print(f"{name}: {rate:,.0f} tok/s, last step {ev[-1][0] if ev else 0}; {curve}")
PY
done
