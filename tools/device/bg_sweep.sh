#!/usr/bin/env bash
# bg_sweep.sh: sweeps longer than one device call (10 minutes) without restarting cells between calls.
#   [WORKERS=N] [TESTS=1] tools/device/bg_sweep.sh start SECS WAIT STUDY[:WORKERS]...   then   bg_sweep.sh poll WAIT
# start: unpacks the prebuilt binaries carried in .gpuwork/stage.tgz (kernels/dev/stage.sh), starts one
# CUDA MPS daemon and runs scripts/reproduce.sh --mps --time-limit SECS for every study side by side,
# each with its own worker count (default $WORKERS, else 8), in its own process session (setsid: they
# outlive the call while the machine stays held). TESTS=1 also runs the staged test_cuda_* programs
# (as MPS clients) and prints their counts. Then it waits like poll. poll: waits up to WAIT seconds or
# until every study has ended, prints progress and copies the logs, the live sweep state
# (live_sweeps.tgz) and, once all ended, results.tgz / sweeps.tgz to $OUT. Call poll again within the
# machine's idle release (30 s) to keep it; a machine goes back after 30 minutes held, so
# start + SECS < 30 min (checkpoints do not travel: a cell cut off restarts on the next machine).
# Every call re-syncs the device's tree with this one: carry .gpuwork/stage.tgz and .gpuwork/sweeps
# with `start` only, never with `poll` (a carried path replaces the live one there, which wiped a
# running sweep's state once). Results go to .gpuwork/results for the same reason (a results/<study>
# written between calls is deleted by the next call's sync); scripts/reproduce.sh --collect can
# rebuild them from the sweep state.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; BG=/tmp/bgout; mode=$1; shift
export CUDA_MPS_PIPE_DIRECTORY=/tmp/statebench-mps CUDA_MPS_LOG_DIRECTORY=/tmp/statebench-mps-log
if [ "$mode" = start ]; then
  secs=$1 wait=$2; shift 2
  rm -rf $BG /tmp/stage; mkdir -p $BG /tmp/stage "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" .gpuwork/sweeps .gpuwork/results
  tar xf .gpuwork/stage.tgz -C /tmp/stage || exit 1
  bin=/tmp/stage/bin; export LD_LIBRARY_PATH=$bin/lib:${LD_LIBRARY_PATH:-}
  nvidia-smi -L; $bin/statebench --version
  nvidia-cuda-mps-control -d && echo "MPS daemon started"
  for item in "$@"; do
    s=${item%%:*} w=${WORKERS:-8}
    [ "$s" != "$item" ] && w=${item#*:}
    echo "$s" >> $BG/studies
    setsid nohup bash -c "SWEEPS=.gpuwork/sweeps RESULTS=.gpuwork/results scripts/reproduce.sh --build $bin --workers $w --time-limit $secs --mps $s; echo \$? > $BG/rc_$s" \
      > $BG/reproduce_$s.log 2>&1 < /dev/null &
    sleep 2
  done
  setsid nohup nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 20 > $BG/smi.log 2>&1 < /dev/null &
  if [ "${TESTS:-0}" = 1 ]; then
    for t in $bin/test_cuda_*; do
      n=$(basename $t)
      (timeout 480 $t > $OUT/$n.log 2>&1; echo "$n rc=$? ok=$(grep -c '^\[       OK \]' $OUT/$n.log) failed=$(grep -c '^\[  FAILED \]' $OUT/$n.log)") &
    done
    wait
    grep -h "^\[  FAILED \]\|Failure" $OUT/test_cuda_*.log | head -20
  fi
else
  wait=$1
fi
all_done() {
  for s in $(cat $BG/studies); do [ -f $BG/rc_$s ] || return 1; done
}
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$wait" ]; do
  all_done && break
  sleep 10
done
sleep 2
echo "== $(date -u +%T) waited $(( $(date +%s) - t0 )) s"
for s in $(cat $BG/studies); do
  echo "-- $s: rc=$(cat $BG/rc_$s 2>/dev/null || echo running)"
  grep -E "done|skip|DIVERGED|FAILED|error|==" $BG/reproduce_$s.log | tail -25
done
tail -3 $BG/smi.log
cp $BG/*.log $OUT/ 2>/dev/null
(cd .gpuwork && find sweeps -type f ! -name checkpoint.bin ! -name '*.lock' ! -name lock -print0 |
  tar -czf "$OUT/live_sweeps.tgz" --null -T - 2>/dev/null)
if all_done; then  # the final state: the same archive under its final name, and the results
  cp $OUT/live_sweeps.tgz $OUT/sweeps.tgz
  (cd .gpuwork && tar -czf $OUT/results.tgz $(for s in $(cat $BG/studies); do [ -d results/$s ] && echo results/$s; done))
fi
ls -la $OUT
