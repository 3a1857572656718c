#!/usr/bin/env bash
# bg_sweep.sh: a sweep longer than one device call (10 minutes) without restarting cells between calls.
#   WORKERS=N tools/device/bg_sweep.sh start SECS WAIT STUDY...   then   tools/device/bg_sweep.sh poll WAIT
# start: runs reproduce_call.sh SECS N --staged --mps STUDY... in its own process session (setsid: it
# outlives the call while the machine stays held), then waits like poll. poll: waits up to WAIT seconds
# or until the run has ended, then prints its progress and copies its logs, the live sweep state
# (live_sweeps.tgz) and, once ended, results.tgz / sweeps.tgz to $OUT. Call poll again within the
# machine's idle release (30 s) to keep it; a machine goes back after 30 minutes held, so SECS + start < 30 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; BG=/tmp/bgout; mode=$1; shift
if [ "$mode" = start ]; then
  secs=$1 wait=$2; shift 2
  rm -rf $BG; mkdir -p $BG
  nvidia-smi -L
  setsid nohup env OUT=$BG bash tools/device/reproduce_call.sh "$secs" ${WORKERS:-8} --staged --mps "$@" > $BG/bg.log 2>&1 < /dev/null &
  echo $! > $BG/pid
  setsid nohup nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 20 > $BG/smi.log 2>&1 < /dev/null &
else
  wait=$1
fi
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$wait" ]; do
  [ -f $BG/results.tgz ] && break
  sleep 10
done
sleep 2
echo "== $(date -u +%T) elapsed since call start $(( $(date +%s) - t0 )) s"
for f in $BG/reproduce_*.log; do [ -f "$f" ] && grep -E "done|skip|DIVERGED|FAILED|error|==" "$f" | tail -40; done
tail -3 $BG/smi.log
tail -5 $BG/bg.log
cp $BG/*.log $OUT/ 2>/dev/null
[ -f $BG/results.tgz ] && cp $BG/results.tgz $BG/sweeps.tgz $OUT/
cd .gpuwork && find sweeps -type f ! -name checkpoint.bin ! -name '*.lock' ! -name lock -print0 | tar -czf "$OUT/live_sweeps.tgz" --null -T - 2>/dev/null
ls -la $OUT
