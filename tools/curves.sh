#!/usr/bin/env bash
# curves.sh: a study's learning curves as one compressed file (results/<study>/curves.jsonl.gz),
# made from its cells' metrics.jsonl, and back. Needs only bash, awk and gzip.
#
#   tools/curves.sh pack SWEEP_DIR OUT.jsonl.gz   every SWEEP_DIR/cells/*/metrics.jsonl, cells in C-locale
#                                                 name order, lines in their order; every evaluation,
#                                                 and at most ~100 training lines a cell (below)
#   tools/curves.sh unpack CURVES.jsonl.gz DIR    writes DIR/cells/<id>/metrics.jsonl (the rounded lines)
#   tools/curves.sh evals CURVES.jsonl.gz [TEXT]  one line per evaluation: cell, step, each eval key's
#                                                 token_accuracy (cells whose id contains TEXT)
#
# Each line is a cell's metrics.jsonl line (docs/run-format.md) with the cell's id put first,
# {"cell": "attention=path,seed=1-0f2a...", "kind": ..., ...}, and every non-integer number rounded
# to 6 significant digits, except the timings, which vary more than that from run to run:
# tokens_per_s to 3 significant digits, elapsed_s to 0.1 s. Integers (step, scored, errors, ...) are
# unchanged. A cell with more than 100 training lines keeps every k-th of them, k = ceil(n / 100),
# and its last (a loss curve of ~100 points; the 20000-step studies log 400). The file is written
# with `gzip -9n` (no name or time stamp), so packing the same cells twice gives the same bytes.
# Read it with `zcat`, Python's gzip module or zlib; `statebench table STUDY --curves DIR` draws it.
set -euo pipefail
export LC_ALL=C

usage() { sed -n 2,16p "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "curves.sh: error: $*" >&2; exit 2; }

# Rounds the numbers of one JSON line outside its strings; the key before a number picks the rule.
ROUND_AWK='
function fmt(v, key,    r) {
  if (key == "tokens_per_s") { r = sprintf("%.3g", v) + 0; return sprintf("%.0f", r) }
  if (key == "elapsed_s") return sprintf("%.1f", v)
  return sprintf("%.6g", v)
}
function round_segment(seg, key,    out, tok) {
  out = ""
  while (match(seg, /-?[0-9]+\.[0-9]+([eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+/)) {
    tok = substr(seg, RSTART, RLENGTH)
    out = out substr(seg, 1, RSTART - 1) fmt(tok + 0, key)
    seg = substr(seg, RSTART + RLENGTH)
  }
  return out seg
}
BEGIN {
  cell = ENVIRON["CURVES_CELL"]; gsub(/\\/, "\\\\", cell); gsub(/"/, "\\\"", cell)
  total = ENVIRON["CURVES_TRAIN"] + 0; every = int((total + 99) / 100); if (every < 1) every = 1
}
/"kind": *"train"/ && (n_train++ % every) != 0 && n_train != total { next }  # keeps the first and the last
{
  n = split($0, p, "\"")
  line = ""; key = ""; inside = 0; str = ""
  for (i = 1; i <= n; i++) {
    if (!inside) {
      line = line (i > 1 ? "\"" : "") round_segment(p[i], key)
      inside = 1; str = ""
    } else {
      str = str p[i]
      if (match(p[i], /\\+$/) && RLENGTH % 2 == 1 && i < n) { str = str "\""; continue }  # an escaped quote
      line = line "\"" str; key = str; inside = 0
    }
  }
  if (line != "") print "{\"cell\": \"" cell "\", " substr(line, 2)
}'

pack() {
  local sweep=$1 out=$2 cell tmp files=()
  [ -d "$sweep/cells" ] || die "'$sweep' has no cells/ directory"
  for cell in "$sweep"/cells/*/; do [ -f "$cell/metrics.jsonl" ] && files+=("$cell/metrics.jsonl"); done
  [ ${#files[@]} -gt 0 ] || die "no cells/*/metrics.jsonl under '$sweep'"
  tmp=$(mktemp "${out}.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  for cell in "${files[@]}"; do
    CURVES_CELL=$(basename "$(dirname "$cell")") CURVES_TRAIN=$(grep -c '"kind": *"train"' "$cell") \
      awk "$ROUND_AWK" "$cell"
  done | gzip -9n > "$tmp"
  chmod 644 "$tmp"
  mv "$tmp" "$out"
  trap - EXIT
  echo "curves.sh: ${#files[@]} cells -> $out ($(wc -c < "$out") bytes)" >&2
}

unpack() {
  local curves=$1 dir=$2
  [ -f "$curves" ] || die "no such file '$curves'"
  gzip -dc "$curves" | CURVES_DIR=$dir awk '
    BEGIN { dir = ENVIRON["CURVES_DIR"] }
    {
      if (!match($0, /^\{"cell": "([^"\\]|\\.)*", /)) { print "curves.sh: error: line " NR ": no cell id" > "/dev/stderr"; exit 2 }
      id = substr($0, 11, RLENGTH - 13); rest = "{" substr($0, RLENGTH + 1)
      gsub(/\\"/, "\"", id); gsub(/\\\\/, "\\", id)
      if (id ~ /\// || id == "." || id == "..") { print "curves.sh: error: line " NR ": bad cell id" > "/dev/stderr"; exit 2 }
      file = dir "/cells/" id "/metrics.jsonl"
      if (file != prev) {
        if (prev != "") close(prev)
        if (!(file in seen)) {
          q = dir "/cells/" id; gsub(/\047/, "\047\\\047\047", q)
          if (system("mkdir -p \047" q "\047") != 0) exit 2
          printf "" > file; close(file); seen[file] = 1
        }
        prev = file
      }
      print rest >> file
    }'
}

evals() {
  local curves=$1 text=${2:-}
  [ -f "$curves" ] || die "no such file '$curves'"
  gzip -dc "$curves" | awk -v text="$text" '
    /"kind": "eval"/ {
      match($0, /^\{"cell": "([^"\\]|\\.)*"/); id = substr($0, 11, RLENGTH - 11)
      if (text != "" && index(id, text) == 0) next
      match($0, /"step": [0-9]+/); out = id "\tstep " substr($0, RSTART + 8, RLENGTH - 8)
      rest = $0
      while (match(rest, /"[^"]+": \{"token_accuracy": [-0-9.eE+]+/)) {
        m = substr(rest, RSTART, RLENGTH); split(m, q, "\"")
        sub(/.*: /, "", m); out = out "\t" q[2] " " m
        rest = substr(rest, RSTART + RLENGTH)
      }
      print out
    }'
}

case ${1:-} in
  pack) [ $# -eq 3 ] || die "usage: curves.sh pack SWEEP_DIR OUT.jsonl.gz"; pack "$2" "$3" ;;
  unpack) [ $# -eq 3 ] || die "usage: curves.sh unpack CURVES.jsonl.gz DIR"; unpack "$2" "$3" ;;
  evals) [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: curves.sh evals CURVES.jsonl.gz [TEXT]"; evals "$2" "${3:-}" ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
