#!/usr/bin/env bash
# reproduce_call.sh: one call on a lent GPU machine (the `device` tool): builds statebench there,
# optionally A/B-times CUDA MPS for concurrent small-model cells, runs scripts/reproduce.sh on the
# given studies until a deadline, and leaves results/ and the resumable sweep state (no checkpoints) under $OUT for the next call to carry back in (.gpuwork/sweeps).
#   tools/device/reproduce_call.sh SECONDS WORKERS [--staged] [--mps|--mps-ab] STUDY...
# --staged: use the statebench prebuilt here and carried in .gpuwork/stage.tgz (kernels/dev/stage.sh)
# instead of building on the device (saves the 2-3 minute build).
set -uo pipefail
cd "$(dirname "$0")/../.."
deadline=$(( $(date +%s) + $1 )) workers=$2; shift 2
mps=off build=build-gpu
if [ "${1:-}" = --staged ]; then
  shift; mkdir -p /tmp/stage && tar xf .gpuwork/stage.tgz -C /tmp/stage || exit 1
  build=/tmp/stage/bin; export LD_LIBRARY_PATH=/tmp/stage/bin/lib:${LD_LIBRARY_PATH:-}
fi
case ${1:-} in --mps) mps=on; shift ;; --mps-ab) mps=ab; shift ;; esac
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
commit=$(cat .gpuwork/COMMIT 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ $build = build-gpu ]; then
  # Configured on every call: a warm machine keeps build-gpu, and the carried COMMIT may be newer.
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSTATEBENCH_COMMIT="$commit" > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  /usr/bin/time -f "build %e s" cmake --build build-gpu -j16 --target statebench > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  tail -1 "$OUT/build.log"
fi
$build/statebench --version
start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d && echo "MPS on"
}
stop_mps() { echo quit | nvidia-cuda-mps-control 2>/dev/null; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; sleep 1; }
ab_once() {  # 8 concurrent small word-problem runs (2 layers, length 64, 600 steps)
  local t0=$(date +%s%N)
  for i in 0 1 2 3 4 5 6 7; do
    $build/statebench train experiments/configs/word_problem_depth.yaml --device cuda --out /tmp/ab/$1$i \
      --set train.precision=tf32 --set model.n_layers=2 --set task.params.length=64 --set train.steps=600 \
      --set train.eval_every=0 --set train.eval_examples=200 --set train.seed=$i > /tmp/ab/$1$i.log 2>&1 &
  done
  wait
  awk -v a=$t0 -v b=$(date +%s%N) -v n="$1" 'BEGIN {printf "A/B %s: 8 concurrent runs in %.1f s\n", n, (b - a) / 1e9}'
}
if [ $mps = ab ]; then
  mkdir -p /tmp/ab; ab_once nomps; start_mps && ab_once mps; stop_mps
  grep -h "error" /tmp/ab/*.log | head -3
  mps=off
fi
extra=(); [ $mps = on ] && extra=(--mps)
mkdir -p .gpuwork/sweeps
for s in "$@"; do
  left=$(( deadline - $(date +%s) - 40 ))
  [ $left -lt 30 ] && { echo "== $s: no time left"; break; }
  SWEEPS=.gpuwork/sweeps scripts/reproduce.sh --build $build --workers "$workers" --time-limit $left "${extra[@]}" "$s" \
    > "$OUT/reproduce_$s.log" 2>&1
  echo "== $s: rc=$?"; grep -E "^== |cells finished|error" "$OUT/reproduce_$s.log" | tail -4
done
tar -czf "$OUT/results.tgz" results
cd .gpuwork && find sweeps -type f ! -name checkpoint.bin ! -name '*.lock' ! -name lock -print0 |
  tar -czf "$OUT/sweeps.tgz" --null -T - && ls -la "$OUT"/*.tgz
