#!/usr/bin/env bash
# ab_train.sh: `statebench bench train` of two builds, interleaved (old, new, old, new, ...) so that
# both see the same machine state, summarised a line per preset and attention kind: each run's
# tokens/s (millions) and the ratio of the means. How the before / after figures of kernels/DESIGN.md
# are made inside one lease.
# Usage: ab_train.sh OLD_STATEBENCH NEW_STATEBENCH RUNS [bench train options...]
#   ab_train.sh /root/n/old/statebench /root/n/new/statebench 2 --device cuda --precision bf16 \
#     --attention path,rope --presets a5_l32,merrill_a5 --seconds 2
set -uo pipefail
[ $# -ge 3 ] || { sed -n 6,8p "$0" >&2; exit 2; }
old=$1 new=$2 runs=$3
shift 3
for b in "$old" "$new"; do [ -x "$b" ] || { echo "ab_train.sh: error: '$b' is not an executable" >&2; exit 2; }; done
case $runs in '' | *[!0-9]* | 0) echo "ab_train.sh: error: RUNS '$runs' is not a positive count" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 1; i <= runs; ++i)); do
  for side in old new; do
    bin=$old
    [ $side = new ] && bin=$new
    "$bin" bench train "$@" > "$tmp/$side.$i" 2>&1 || { echo "ab_train.sh: $side run $i failed:" >&2; cat "$tmp/$side.$i" >&2; exit 1; }
  done
done
head -1 "$tmp/old.1" | sed 's/^/old: /'
head -1 "$tmp/new.1" | sed 's/^/new: /'
# The rows of bench train's table (after its header line "preset attention ..."): tokens/s by
# (preset, attention) for each side, in run order.
for f in "$tmp"/old.* "$tmp"/new.*; do
  side=$(basename "$f" | cut -d. -f1)
  awk -v side="$side" '$1 == "preset" && $2 == "attention" {
      for (c = 1; c <= NF; ++c) if ($c == "tokens/s") col = c
      next
    }
    col && NF >= col && $col ~ /^[0-9.]+$/ { print $1, $2, side, $col }' "$f"
done | awk '{
    key = $1 " " $2
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    list[key, $3] = list[key, $3] sprintf(" %.3f", $4 / 1e6)
    sum[key, $3] += $4; cnt[key, $3] += 1
  }
  END {
    printf "%-16s %-10s %-24s %-24s %s\n", "preset", "attention", "old (M tokens/s)", "new (M tokens/s)", "new/old"
    for (i = 1; i <= n; ++i) {
      k = order[i]
      split(k, p, " ")
      ratio = cnt[k, "old"] && cnt[k, "new"] && sum[k, "old"] > 0 ? \
              sprintf("%.3f", (sum[k, "new"] / cnt[k, "new"]) / (sum[k, "old"] / cnt[k, "old"])) : "-"
      printf "%-16s %-10s %-24s %-24s %s\n", p[1], p[2], list[k, "old"], list[k, "new"], ratio
    }
  }'
