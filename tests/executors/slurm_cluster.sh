#!/bin/sh
# A throw-away single-node Slurm cluster (munged + slurmctld + slurmd) for the executor tests.
#   slurm_cluster.sh start DIR   writes DIR/slurm.conf, starts the daemons, waits for the node to be
#                                idle; prints "SLURM_CONF=DIR/slurm.conf" (export it to use the cluster)
#   slurm_cluster.sh stop DIR    stops the daemons started in DIR
# Needs the Debian packages slurm-wlm (slurmctld, slurmd, client tools) and munge, and root (the
# daemons run as root here; a real cluster runs them as the slurm user). Exit 77 = not installed.
set -eu
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop_pidfile() {
  [ -f "$1" ] || return 0
  pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

case "$cmd" in
stop)
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
  exit 0
  ;;
start) ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac

for tool in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null 2>&1 || { echo "slurm_cluster: $tool not installed (apt-get install slurm-wlm munge)" >&2; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "slurm_cluster: needs root to start slurmd" >&2; exit 77; }

mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
host=$(hostname -s)
cpus=$(nproc)
# Ports from the directory's inode keep concurrent test clusters apart.
base=$(( 20000 + $(stat -c %i "$dir") % 20000 ))

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed"

cat > "$dir/slurm.conf" <<CONF
ClusterName=recipetest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i
slurmd -N "$host"

i=0
until sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then
    echo "slurm_cluster: node did not become idle; logs in $dir" >&2
    sinfo >&2 || true
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    "$0" stop "$dir"
    exit 1
  fi
  sleep 0.2
done
echo "SLURM_CONF=$dir/slurm.conf"
