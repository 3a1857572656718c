#!/usr/bin/env bash
# reproduce.sh: runs the paper-reproduction studies (experiments/<study>.yaml) and exports each
# finished one to results/<study>/: tables (Markdown, CSV), plots, every cell's summary/config/
# metrics, the manifest and PROVENANCE.md (commit, device, dates, command, wall time). Resumable:
# run it again after a stop (--time-limit stops a sweep cleanly; the next call resumes it).
#
#   scripts/reproduce.sh [--build DIR] [--devices LIST] [--workers N] [--time-limit S] [--mps]
#                        [--precision P] [--collect] [STUDY...]
#
# --collect runs nothing: it (re)exports results/<study>/ from a finished sweep's state (tables made
# by this build's `statebench table`; the provenance from the sweep's invocations.tsv). The results
# directory is ${RESULTS:-results}.
#
# --mps runs the cells under CUDA MPS (a daemon started for this script and stopped at its end; one
# already running is shared), so concurrent small-model cells share the GPU instead of time-slicing
# it (2x measured on an H100).
#
# --precision sets train.precision on GPUs (fp32, tf32 or bf16). Default: bf16 for mqar* and mqrar*
# (their width-256/512 models have head dim 128, where the fp32-mode PaTH kernels run one warp per
# SM: bf16 trains those cells 2.7x faster on an H100), tf32 for the others.
# STUDY defaults to: fflm a5_depth s5_depth mqrar mqar. Devices default to every GPU nvidia-smi
# lists, else the CPU. Sweep state lives in ${SWEEPS:-sweeps}/<study>; each
# invocation appends one line (date, commit, device, seconds, exit code) to its invocations.tsv.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build DEVICES="" WORKERS="" LIMIT=0 MPS=0 PRECISION="" COLLECT=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --devices) DEVICES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --time-limit) LIMIT=$2; shift 2 ;;
    --mps) MPS=1; shift ;;
    --precision) PRECISION=$2; shift 2 ;;
    --collect) COLLECT=1; shift ;;
    -h|--help) sed -n 2,22p "$0"; exit 0 ;;
    -*) echo "reproduce.sh: error: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
STUDIES=("$@")
[ ${#STUDIES[@]} -eq 0 ] && STUDIES=(fflm a5_depth s5_depth mqrar mqar)
SB="$BUILD/statebench"
[ -x "$SB" ] || { echo "reproduce.sh: error: '$SB' not found (build first, or pass --build DIR)" >&2; exit 2; }
for s in "${STUDIES[@]}"; do
  [ -f "experiments/$s.yaml" ] || { echo "reproduce.sh: error: no study 'experiments/$s.yaml'" >&2; exit 2; }
done
# sweep_seconds SWEEP_DIR: the summed wall time of the sweep's invocations.
sweep_seconds() { awk -F'\t' '{s += $4} END {printf "%.0f", s}' "$1/invocations.tsv"; }
# collect STUDY SWEEP_DIR RESULT_DIR: exports a finished sweep (atomically: written to RESULT_DIR.tmp, then moved).
collect() {
  local s=$1 out=$2 res=$3 last_end id
  rm -rf "$res.tmp" && mkdir -p "$res.tmp/cells"
  cp "$out/manifest.json" "$out/study.yaml" "$out/invocations.tsv" "$res.tmp/"
  for cell in "$out"/cells/*/; do
    id=$(basename "$cell")
    mkdir -p "$res.tmp/cells/$id"
    for f in summary.json config.yaml metrics.jsonl; do [ -f "$cell/$f" ] && cp "$cell/$f" "$res.tmp/cells/$id/"; done
  done
  "$SB" table "$out" --out "$res.tmp/tables.md" --plots "$res.tmp/plots" &&
    "$SB" table "$out" --format csv --out "$res.tmp/tables.csv" --no-plots || return 1
  last_end=$(tail -1 "$out/invocations.tsv" | { IFS=$'\t' read -r d _ _ secs _; date -u -d "@$(( $(date -u -d "$d" +%s) + ${secs%.*} ))" +%Y-%m-%dT%H:%M:%SZ; })
  {
    echo "# $s: provenance"
    echo
    echo "- Study: \`experiments/$s.yaml\` (copied as \`study.yaml\`); cells: $(grep -o '"id": *"' "$out/manifest.json" | wc -l)" \
      "($(grep -o '"state": *"skipped"' "$out/manifest.json" | wc -l) skipped by the protocol)"
    echo "- Commit(s): $(cut -f2 "$out/invocations.tsv" | sort -u | paste -sd, | sed 's/,/, /g')"
    echo "- Device(s): $(cut -f3 "$out/invocations.tsv" | sort -u | paste -sd';' | sed 's/;/; /g')"
    echo "- Dates (UTC): $(head -1 "$out/invocations.tsv" | cut -f1) to $last_end"
    echo "- Command: \`scripts/reproduce.sh $s\`, which ran \`$(tail -1 "$out/invocations.tsv" | cut -f6)\`"
    echo "- Wall time of the study: $(sweep_seconds "$out") s over $(wc -l < "$out/invocations.tsv") invocation(s) (sweep time only: no build, no machine start)"
    echo "- Tables: \`statebench table results/$s\` (\`tables.md\`, \`tables.csv\`, \`plots/\`); every cell's own provenance is in \`cells/*/summary.json\`"
    echo
    echo "| started (UTC) | commit | device | seconds | exit | command |"
    echo "| --- | --- | --- | --- | --- | --- |"
    awk -F'\t' '{printf "| %s | %s | %s | %s | %s | `%s` |\n", $1, $2, $3, $4, $5, $6}' "$out/invocations.tsv"
  } > "$res.tmp/PROVENANCE.md"
  rm -rf "$res" && mv "$res.tmp" "$res"
}
SWEEPS=${SWEEPS:-sweeps} RESULTS=${RESULTS:-results}
if [ $COLLECT = 1 ]; then
  for s in "${STUDIES[@]}"; do
    [ -f "$SWEEPS/$s/invocations.tsv" ] || { echo "reproduce.sh: error: --collect: no sweep state '$SWEEPS/$s/invocations.tsv'" >&2; exit 2; }
    collect "$s" "$SWEEPS/$s" "$RESULTS/$s" || exit 1
    echo "== $s: results in $RESULTS/$s/ ($(sweep_seconds "$SWEEPS/$s") s of sweep time)"
  done
  exit 0
fi
if [ -z "$DEVICES" ]; then
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${n:-0}" -gt 0 ]; then DEVICES=$(seq -s, -f 'cuda:%g' 0 $((n - 1))); else DEVICES=cpu; fi
fi
case $PRECISION in ""|fp32|tf32|bf16) ;; *) echo "reproduce.sh: error: --precision '$PRECISION' is not fp32, tf32 or bf16" >&2; exit 2 ;; esac
EXTRA=()
[[ $DEVICES == *cuda* ]] && EXTRA+=(--set train.device=cuda)
[ -n "$WORKERS" ] && EXTRA+=(--workers "$WORKERS")
study_precision() {  # the GPU precision of one study
  if [ -n "$PRECISION" ]; then echo "$PRECISION"; else case $1 in mqar*|mqrar*) echo bf16 ;; *) echo tf32 ;; esac; fi
}
if [[ $DEVICES == *cuda* ]]; then
  DEVICE_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  DEVICE_NAME="$DEVICE_NAME x $(awk -F, '{print NF}' <<<"$DEVICES") ($DEVICES)"
else
  DEVICE_NAME="CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads"
fi
COMMIT=$("$SB" --version | sed -n 's/.*(\(.*\)).*/\1/p')
if [ $MPS = 1 ]; then
  command -v nvidia-cuda-mps-control >/dev/null || { echo "reproduce.sh: error: --mps: nvidia-cuda-mps-control not found" >&2; exit 2; }
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/statebench-mps} CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/statebench-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  # A daemon already serving this pipe directory (another reproduce.sh running a second study side
  # by side) is shared and left running; one started here is stopped at exit.
  if echo get_server_list | nvidia-cuda-mps-control > /dev/null 2>&1; then
    echo "== MPS: sharing the daemon already running at $CUDA_MPS_PIPE_DIRECTORY"
  else
    nvidia-cuda-mps-control -d || { echo "reproduce.sh: error: --mps: could not start the MPS daemon" >&2; exit 2; }
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
  fi
  DEVICE_NAME="$DEVICE_NAME, MPS"
fi
status=0
for s in "${STUDIES[@]}"; do
  out="$SWEEPS/$s" res="$RESULTS/$s"
  mkdir -p "$out"
  cmd=("$SB" sweep "experiments/$s.yaml" --out "$out" --devices "$DEVICES" --progress plain "${EXTRA[@]}")
  [[ $DEVICES == *cuda* ]] && cmd+=(--set "train.precision=$(study_precision "$s")")
  echo "== $s: ${cmd[*]}"
  start=$(date +%s%N) date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  if [ "$LIMIT" -gt 0 ]; then timeout -s INT -k 60 "$LIMIT" "${cmd[@]}"; else "${cmd[@]}"; fi
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}')
  printf '%s\t%s\t%s\t%s\t%d\t%s\n' "$date" "$COMMIT" "$DEVICE_NAME" "$secs" "$rc" "${cmd[*]}" >> "$out/invocations.tsv"
  if [ $rc -ne 0 ]; then
    echo "== $s: stopped (exit $rc) after ${secs}s; run the same command again to resume"
    status=1
    [ $rc -eq 124 ] && break  # out of time: the later studies would not start either
    continue
  fi
  collect "$s" "$out" "$res" || { status=1; continue; }
  echo "== $s: done in $(sweep_seconds "$out")s in all; results in $res/"
  cat "$res/tables.md"
done
exit $status
