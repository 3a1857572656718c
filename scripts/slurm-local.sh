#!/usr/bin/env bash
# slurm-local.sh: a single-node Slurm (munged, slurmctld, slurmd) on this machine, for CI and for
# trying `statebench sweep --launcher slurm` without a cluster. Debian 12, as root, no systemd needed.
#   bash scripts/slurm-local.sh start    install missing packages, configure, start, wait for the node
#   bash scripts/slurm-local.sh stop     cancel jobs, stop the daemons this script started
#   bash scripts/slurm-local.sh status   daemons and sinfo
set -euo pipefail

BASE=${SLURM_LOCAL_DIR:-/tmp/statebench-slurm}   # state, logs and pid files
CONF=/etc/slurm/slurm.conf                        # Debian's default: the client tools find it
PACKAGES=(slurmctld slurmd slurm-client munge)
NODE=$(hostname -s)                               # slurmctld runs only where SlurmctldHost = hostname -s
CPUS=$(nproc)

say() { echo "slurm-local: $*" >&2; }
die() { say "error: $*"; exit 1; }
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

# A live process (not a zombie: without an init system orphans are reaped late) named $2 in pid file $1.
alive() {
  local pid state
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ] || return 1
  state=$(awk '{ print $3 }' /proc/"$pid"/stat 2>/dev/null) && [ -n "$state" ] && [ "$state" != Z ]
}

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local t0; t0=$(date +%s.%N)
  say "installing ${missing[*]}"
  # Without an init system the packages' postinst scripts must not try to start the services.
  local policy=/usr/sbin/policy-rc.d added=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 755 "$policy"; added=1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || {
    [ $added = 1 ] && rm -f "$policy"; die "apt-get install ${missing[*]} failed"; }
  [ $added = 1 ] && rm -f "$policy"
  say "installed in $(seconds_since "$t0")"
}

start_munge() {
  install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge
  install -d -o munge -g munge -m 0711 /var/lib/munge
  install -d -o munge -g munge -m 0755 /run/munge
  [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged
  : > "$BASE/run/munged.ours"   # stop kills munged only if this script started it
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged did not answer (see /var/log/munge/munged.log)"
}

# Writes slurm.conf; returns 1 when it was already identical.
write_conf() {
  local mem tmp
  # Half of the memory (stable across runs), at most what is available, in 256 MB steps.
  mem=$(awk '/^MemTotal/ {t=$2} /^MemAvailable/ {a=$2}
             END {m=t/2; if (a<m) m=a; m=int(m/1024/256)*256; if (m<256) m=256; print m}' /proc/meminfo)
  tmp=$(mktemp)
  cat > "$tmp" <<EOF
# Written by statebench scripts/slurm-local.sh: one node, no cgroups, no accounting database.
ClusterName=statebench
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$BASE/state/ctld
SlurmdSpoolDir=$BASE/state/d
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
KillWait=5
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mkdir -p /etc/slurm
  if cmp -s "$tmp" "$CONF"; then rm -f "$tmp"; return 1; fi
  mv "$tmp" "$CONF" && chmod 644 "$CONF"
  say "wrote $CONF (node $NODE, $CPUS CPUs, ${mem} MB)"
}

wait_for_node() {
  local t0 state; t0=$(date +%s.%N)
  for _ in $(seq 300); do
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1 || true)
    case "$state" in
      idle|mixed|allocated|completing) return 0 ;;
      down*|drain*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 0.2
  done
  tail -n 20 "$BASE/log/slurmctld.log" "$BASE/log/slurmd.log" >&2 || true
  die "node $NODE not up after $(seconds_since "$t0") (state '$state')"
}

stop_pidfile() {  # pid file, process name: TERM, up to 15 s, then KILL
  alive "$1" "$2" || { rm -f "$1"; return 0; }
  local pid; pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do alive "$1" "$2" || break; sleep 0.1; done
  alive "$1" "$2" && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

stop_slurm() {
  if alive "$BASE/run/slurmctld.pid" slurmctld; then
    local jobs; jobs=$(squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 100); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  stop_pidfile "$BASE/run/slurmd.pid" slurmd
  stop_pidfile "$BASE/run/slurmctld.pid" slurmctld
}

start() {
  local t0; t0=$(date +%s.%N)
  [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"
  install_packages
  mkdir -p "$BASE/state/ctld" "$BASE/state/d" "$BASE/log" "$BASE/run"
  start_munge
  if write_conf && { alive "$BASE/run/slurmctld.pid" slurmctld || alive "$BASE/run/slurmd.pid" slurmd; }; then
    say "configuration changed: restarting the daemons"
    stop_slurm
  fi
  alive "$BASE/run/slurmctld.pid" slurmctld || /usr/sbin/slurmctld
  alive "$BASE/run/slurmd.pid" slurmd || /usr/sbin/slurmd
  wait_for_node
  say "Slurm is up (partition debug, node $NODE, $CPUS CPUs) after $(seconds_since "$t0")"
}

stop() {
  stop_slurm
  if [ -e "$BASE/run/munged.ours" ]; then
    stop_pidfile /run/munge/munged.pid munged
    rm -f "$BASE/run/munged.ours"
  fi
  say "stopped"
}

status() {
  for d in slurmctld slurmd; do
    if alive "$BASE/run/$d.pid" "$d"; then echo "$d: running (pid $(cat "$BASE/run/$d.pid"))"; else echo "$d: not running"; fi
  done
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then echo "munged: answering"; else echo "munged: not answering"; fi
  sinfo 2>&1 || true
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
