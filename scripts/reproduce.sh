#!/usr/bin/env bash
# reproduce.sh: runs the paper-reproduction studies (experiments/<study>.yaml) and exports each
# finished one to results/: study.yaml, manifest.json, tables (Markdown, CSV), SVG plots, every
# cell's summary.json as one line of cells.jsonl.gz, the learning curves as one curves.jsonl.gz
# (tools/curves.sh) and PROVENANCE.md (commit, device, dates, command, wall time). Resumable: run
# it again after a stop (--time-limit stops a sweep cleanly; the next call resumes it).
#
#   scripts/reproduce.sh [--build DIR] [--devices LIST] [--workers N] [--time-limit S] [--mps]
#                        [--precision P] [--collect] [--pool GROUP] [STUDY...]
#
# --collect runs nothing: it (re)exports a finished sweep's state (tables made by this build's
# `statebench table` from the exported files; the provenance from the sweep's invocations.tsv).
# The results directory is ${RESULTS:-results}.
#
# --pool GROUP exports each STUDY to results/GROUP/STUDY/ (a study that adds seeds to another) and
# rebuilds results/GROUP/ from every study there, in name order: tables.md, tables.csv and plots/
# by `statebench table` over all of them (their runs pooled), and a PROVENANCE.md listing each.
# A study already exported into a group goes back there without --pool; others to results/STUDY/.
#
# --mps runs the cells under CUDA MPS (a daemon started for this script; one already running is
# shared; the last reproduce.sh using a daemon that reproduce.sh started stops it), so concurrent
# small-model cells share the GPU instead of time-slicing it (2x measured on an H100). A cell killed
# with work in flight there (kill -9, the OOM killer) can end the other cells on that GPU with a
# CUDA error (seen on an H200); they are recorded failed, and the next call retries them from their
# checkpoints. --time-limit and Ctrl-C stop every cell after its step in progress, as unfinished.
#
# --precision sets train.precision on GPUs (fp32, tf32 or bf16). Default: bf16 for mqar* and mqrar*
# (their width-256/512 models have head dim 128, where the fp32-mode PaTH kernels run one warp per
# SM: bf16 trains those cells 2.7x faster on an H100), tf32 for the others.
# STUDY defaults to: fflm a5_depth_short s5_depth_short mqrar mqar. Devices default to every GPU
# nvidia-smi lists, else the CPU. Sweep state lives in ${SWEEPS:-sweeps}/<study>; each
# invocation appends one line (date, commit, device, seconds, exit code) to its invocations.tsv.
set -uo pipefail
export LC_ALL=C  # name order of globs and sort
cd "$(dirname "$0")/.."
BUILD=build DEVICES="" WORKERS="" LIMIT=0 MPS=0 PRECISION="" COLLECT=0 POOL=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --devices) DEVICES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --time-limit) LIMIT=$2; shift 2 ;;
    --mps) MPS=1; shift ;;
    --precision) PRECISION=$2; shift 2 ;;
    --collect) COLLECT=1; shift ;;
    --pool) POOL=$2; shift 2 ;;
    -h|--help) sed -n 2,29p "$0"; exit 0 ;;
    -*) echo "reproduce.sh: error: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
  esac
done
STUDIES=("$@")
[ ${#STUDIES[@]} -eq 0 ] && STUDIES=(fflm a5_depth_short s5_depth_short mqrar mqar)
SB="$BUILD/statebench"
[ -x "$SB" ] || { echo "reproduce.sh: error: '$SB' not found (build first, or pass --build DIR)" >&2; exit 2; }
case $POOL in */*|.|..) echo "reproduce.sh: error: --pool '$POOL' is not a folder name" >&2; exit 2 ;; esac
if [ $COLLECT = 0 ]; then
  for s in "${STUDIES[@]}"; do
    [ -f "experiments/$s.yaml" ] || { echo "reproduce.sh: error: no study 'experiments/$s.yaml'" >&2; exit 2; }
  done
fi
SWEEPS=${SWEEPS:-sweeps} RESULTS=${RESULTS:-results}
# sweep_seconds SWEEP_DIR: the summed wall time of the sweep's invocations.
sweep_seconds() { awk -F'\t' '{s += $4} END {printf "%.0f", s}' "$1/invocations.tsv"; }
# group_of STUDY: --pool's GROUP, else the group that already holds STUDY, else nothing.
group_of() {
  local m
  [ -n "$POOL" ] && { echo "$POOL"; return; }
  for m in "$RESULTS"/*/"$1"/manifest.json; do [ -f "$m" ] && { basename "$(dirname "$(dirname "$m")")"; return; }; done
}
# pack_cells CELLS_DIR OUT: every CELLS_DIR/<id>/summary.json as one line of OUT (a study's
# cells.jsonl.gz), {"id": "<id>", "summary": <summary.json's object, unchanged>}, cells in name
# order, written by `gzip -9n` (no name or time stamp: the same cells give the same bytes).
# (A JSON text holds no newline inside a string, so deleting newlines keeps its meaning.)
pack_cells() {
  local cell id
  for cell in "$1"/*/; do
    [ -f "$cell/summary.json" ] || continue
    id=$(basename "$cell") && id=${id//\\/\\\\} && id=${id//\"/\\\"}
    printf '{"id": "%s", "summary": %s}\n' "$id" "$(tr -d '\n' < "$cell/summary.json")"
  done | gzip -9n > "$2"
}
# collect STUDY SWEEP_DIR RESULT_DIR SHOWN_PATH PLOTS: exports a finished sweep (atomically: written
# to RESULT_DIR.tmp, then moved); the tables are made from the exported files; PLOTS 0 writes none.
collect() {
  local s=$1 out=$2 res=$3 shown=$4 plots=$5 last_end id cell plot_args=(--no-plots) curves=""
  rm -rf "$res.tmp" && mkdir -p "$res.tmp"
  cp "$out/manifest.json" "$out/study.yaml" "$res.tmp/" || return 1
  pack_cells "$out/cells" "$res.tmp/cells.jsonl.gz" || return 1
  for cell in "$out"/cells/*/; do
    id=$(basename "$cell")
    if [ ! -f "$cell/summary.json" ] && [ -f "$cell/config.yaml" ]; then  # unfinished: the table reads its config
      mkdir -p "$res.tmp/cells/$id" && cp "$cell/config.yaml" "$res.tmp/cells/$id/"
    fi
  done
  if compgen -G "$out/cells/*/metrics.jsonl" > /dev/null; then
    tools/curves.sh pack "$out" "$res.tmp/curves.jsonl.gz" || return 1
    curves="; learning curves: \`curves.jsonl.gz\` (\`tools/curves.sh\`)"
  fi
  [ "$plots" = 1 ] && plot_args=(--plots "$res.tmp/plots")
  "$SB" table "$res.tmp" --out "$res.tmp/tables.md" "${plot_args[@]}" &&
    "$SB" table "$res.tmp" --format csv --out "$res.tmp/tables.csv" --no-plots || return 1
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
    echo "- Tables: \`statebench table $shown\` (\`tables.md\`, \`tables.csv\`$([ "$plots" = 1 ] && echo ", \`plots/\`"))$curves; every cell's summary.json, with its own provenance, is a line of \`cells.jsonl.gz\`"
    echo
    echo "| started (UTC) | commit | device | seconds | exit | command |"
    echo "| --- | --- | --- | --- | --- | --- |"
    awk -F'\t' '{printf "| %s | %s | %s | %s | %s | `%s` |\n", $1, $2, $3, $4, $5, $6}' "$out/invocations.tsv"
  } > "$res.tmp/PROVENANCE.md"
  rm -rf "$res" && mv "$res.tmp" "$res"
}
# pool GROUP: RESULTS/GROUP's pooled tables, plots and PROVENANCE.md over every study exported there.
pool() {
  local g=$1 dir="$RESULTS/$1" m parts=() names=() shown="" total=0 p
  for m in "$dir"/*/manifest.json; do [ -f "$m" ] && parts+=("$(dirname "$m")"); done
  [ ${#parts[@]} -gt 0 ] || { echo "reproduce.sh: error: no study exported under '$dir'" >&2; return 1; }
  for p in "${parts[@]}"; do names+=("$(basename "$p")"); shown+=" results/$g/$(basename "$p")"; done
  rm -rf "$dir/plots.tmp"
  "$SB" table "${parts[@]}" --out "$dir/tables.md" --plots "$dir/plots.tmp" &&
    "$SB" table "${parts[@]}" --format csv --out "$dir/tables.csv" --no-plots || return 1
  rm -rf "$dir/plots" && mv "$dir/plots.tmp" "$dir/plots"
  {
    echo "# $g: provenance"
    echo
    echo "- Pooled from ${#parts[@]} studies, each in its folder here with its study, manifest, tables, learning" \
      "curves, every cell's summary (\`cells.jsonl.gz\`) and its own \`PROVENANCE.md\`: $(printf '`%s`, ' "${names[@]}" | sed 's/, $//')"
    echo "- Tables: \`statebench table$shown\` (\`tables.md\`; \`--format csv\`: \`tables.csv\`;" \
      "\`--plots results/$g/plots\`: \`plots/\`), made by \`scripts/reproduce.sh --collect --pool $g ...\`"
    echo
    echo "| study | cells | commit(s) | device(s) | dates (UTC) | wall time |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for p in "${parts[@]}"; do
      local f="$p/PROVENANCE.md"
      printf '| `%s` | %s | %s | %s | %s | %s |\n' "$(basename "$p")" \
        "$(sed -n 's/^- Study: .*; cells: //p' "$f")" "$(sed -n 's/^- Commit(s): //p' "$f")" \
        "$(sed -n 's/^- Device(s): //p' "$f")" "$(sed -n 's/^- Dates (UTC): //p' "$f")" \
        "$(sed -n 's/^- Wall time of the study: \(.*\) (sweep time only.*/\1/p' "$f")"
      total=$((total + $(sed -n 's/^- Wall time of the study: \([0-9]*\) s .*/\1/p' "$f")))
    done
    echo
    echo "Wall time of all ${#parts[@]} studies: $total s (sweep time only)."
  } > "$dir/PROVENANCE.md.tmp" && mv "$dir/PROVENANCE.md.tmp" "$dir/PROVENANCE.md"
}
# export STUDY: collect (into its group, if any, then pool the group). Prints where the tables are.
export_study() {
  local s=$1 g
  g=$(group_of "$s")
  if [ -n "$g" ]; then
    mkdir -p "$RESULTS/$g"
    collect "$s" "$SWEEPS/$s" "$RESULTS/$g/$s" "results/$g/$s" 0 && pool "$g" || return 1
    TABLES="$RESULTS/$g/tables.md"
  else
    collect "$s" "$SWEEPS/$s" "$RESULTS/$s" "results/$s" 1 || return 1
    TABLES="$RESULTS/$s/tables.md"
  fi
}
if [ $COLLECT = 1 ]; then
  for s in "${STUDIES[@]}"; do
    [ -f "$SWEEPS/$s/invocations.tsv" ] || { echo "reproduce.sh: error: --collect: no sweep state '$SWEEPS/$s/invocations.tsv'" >&2; exit 2; }
    export_study "$s" || exit 1
    echo "== $s: results in $(dirname "$TABLES")/ ($(sweep_seconds "$SWEEPS/$s") s of sweep time)"
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
version=$("$SB" --version 2>&1) || { echo "reproduce.sh: error: '$SB' does not run: $(head -1 <<<"$version")" >&2; exit 2; }
COMMIT=$(sed -n 's/.*(\(.*\)).*/\1/p' <<<"$version")
if [ $MPS = 1 ]; then
  command -v nvidia-cuda-mps-control >/dev/null || { echo "reproduce.sh: error: --mps: nvidia-cuda-mps-control not found" >&2; exit 2; }
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/statebench-mps} CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/statebench-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  # A daemon already serving this pipe directory (another reproduce.sh running a second study side
  # by side) is shared. Each reproduce.sh using it leaves its pid in mps-users/; one that reproduce.sh
  # started (mps-users/started) is stopped by the last live user at its exit, never under another.
  users="$CUDA_MPS_PIPE_DIRECTORY/mps-users"
  mkdir -p "$users" && touch "$users/$$"
  mps_release() {
    rm -f "$users/$$"
    local f
    for f in "$users"/[0-9]*; do [ -e "$f" ] && kill -0 "${f##*/}" 2>/dev/null && return 0; done
    [ -f "$users/started" ] && rm -f "$users/started" && echo quit | nvidia-cuda-mps-control
    return 0
  }
  trap mps_release EXIT
  if echo get_server_list | nvidia-cuda-mps-control > /dev/null 2>&1; then
    echo "== MPS: sharing the daemon already running at $CUDA_MPS_PIPE_DIRECTORY"
  else
    nvidia-cuda-mps-control -d || { echo "reproduce.sh: error: --mps: could not start the MPS daemon" >&2; exit 2; }
    touch "$users/started"
  fi
  DEVICE_NAME="$DEVICE_NAME, MPS"
fi
status=0
for s in "${STUDIES[@]}"; do
  out="$SWEEPS/$s"
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
  export_study "$s" || { status=1; continue; }
  echo "== $s: done in $(sweep_seconds "$out")s in all; results in $(dirname "$TABLES")/"
  cat "$TABLES"
done
exit $status
