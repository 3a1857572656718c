#!/usr/bin/env bash
# step_profile.sh CONFIG NAME [--set k=v ...]: one device call from a staged archive
# (kernels/dev/stage.sh -> .gpuwork/stage.tgz): Nsight Compute times every kernel of 3 training
# steps of CONFIG (no evaluation) and prints the kernels by total device time, per step, with
# their share, so the training step's cost can be attributed (cuBLAS, attention, elementwise).
set -u
cfg=$1 name=$2; shift 2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/stage && tar xf .gpuwork/stage.tgz -C /tmp/stage || exit 1
export LD_LIBRARY_PATH=/tmp/stage/bin/lib:${LD_LIBRARY_PATH:-}
csv="$OUT/step_$name.csv"
# 4 steps, the first skipped by --launch-skip-before-match is not possible by step, so all 4 are
# timed and the summary divides by the step count; the final evaluation sees only 8 examples.
timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
  /tmp/stage/bin/statebench train "$cfg" --device cuda --out /tmp/step_$name --set train.steps=4 \
  --set optim.warmup_steps=1 --set train.eval_every=0 --set train.checkpoint_every=0 --set "task.eval=[{split: val, examples: 8}]" \
  --set train.target_accuracy=0 "$@" > "$csv" 2> "$OUT/step_$name.err"
echo "== $name rc=$?"
python3 - "$csv" 4 <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
hdr = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
h = rows[hdr]; k = h.index('Kernel Name'); t = h.index('gpu__time_duration.sum')
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[hdr + 2:]:
    try: v = float(r[t].replace(',', ''))
    except ValueError: continue
    n = r[k].split('(')[0][:70]; tot[n] += v; cnt[n] += 1
steps = int(sys.argv[2]); all_ = sum(tot.values())
print(f"total {all_ / steps / 1e6:.2f} ms per step over {sum(cnt.values())} launches")
for n, v in sorted(tot.items(), key=lambda x: -x[1])[:22]:
    print(f"{v / steps / 1e3:9.1f} us/step {100 * v / all_:5.1f}%  x{cnt[n] / steps:5.1f}  {n}")
PY
