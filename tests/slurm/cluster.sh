#!/usr/bin/env bash
# A real Slurm cluster of one node on this host, for the tests: munged, slurmctld and slurmd from
# Debian's packages (slurmctld, slurmd, slurm-client, munge), every file in DIR, every port on
# loopback, nothing of the system's own configuration touched.
#
#   tests/slurm/cluster.sh start DIR   # prints the line to eval: export SLURM_CONF=DIR/slurm.conf
#   tests/slurm/cluster.sh stop DIR    # stops the daemons it started (by their pid files)
#
# The node is this host by its short name (it must resolve: ranks started by srun find the first
# node by name), with at least 8 CPUs; one partition, "debug". No accounting database: a finished
# job's state is read with `scontrol show job` (kept MinJobAge=600 s). Exit codes:
# 0 started, 77 the packages are missing and cannot be installed (the caller skips), 1 failure
# (the daemons' logs are printed).
set -euo pipefail
action=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}

stop() {
  for name in slurmd slurmctld munged; do
    local pidfile="$dir/$name.pid"
    [ -s "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [ "$action" = stop ]; then
  # Jobs a failed test left running are cancelled first: their slurmstepd and processes would
  # outlive the daemons.
  if [ -s "$dir/slurmctld.pid" ] && [ -f "$dir/slurm.conf" ]; then
    SLURM_CONF="$dir/slurm.conf" scancel --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop
  exit 0
fi

source "$(dirname "$0")/../support/ensure-packages.sh"
ensure_packages "cluster.sh: Slurm" munged slurmctld slurmd sbatch squeue scontrol scancel srun sinfo -- \
  slurmctld slurmd slurm-client munge

mkdir -p "$dir/state" "$dir/spool"
chmod 700 "$dir"
# Both ports from one process that holds both sockets while it asks, so they differ: two
# separate asks can be handed the same port once the first socket is closed (CI saw slurmd fail
# to bind the port slurmctld had, "SlurmctldPort == SlurmdPort").
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
# At least 8 CPUs, whatever the host has (config_overrides lets slurmd accept more than it
# counts): a job of 3 or 4 tasks must start on a 2-core machine, as gyre run starts 4 workers there.
cpus=$(( $(nproc) > 8 ? $(nproc) : 8 ))
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
user=$(id -un)
# Job ids of their own: clusters of tests that run side by side (ctest -j) must not share them,
# since srun's ranks derive their store port from the job id and tests look for a job's slurmstepd.
first_job=$(( (RANDOM * 32768 + RANDOM) % 50000000 + 1000 ))
node=$(hostname -s)  # a name that resolves, as on a real cluster: workers look the first node up

# munge: a key of our own and a socket in DIR.
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge.key"
munged --force --key-file "$dir/munge.key" --socket "$dir/munge.socket" --pid-file "$dir/munged.pid" \
  --log-file "$dir/munged.log" --seed-file "$dir/munge.seed"

cat > "$dir/slurm.conf" <<CONF
ClusterName=gyretest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
SlurmdParameters=config_overrides
FirstJobId=$first_job
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
LaunchParameters=use_interactive_step
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
KillWait=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF="$dir/slurm.conf"

fail() {
  echo "cluster.sh: $1" >&2
  for log in munged slurmctld slurmd; do
    [ -f "$dir/$log.log" ] && { echo "--- $log.log" >&2; tail -20 "$dir/$log.log" >&2; }
  done
  stop
  exit 1
}

slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N "$node" || fail "slurmd did not start"
for _ in $(seq 100); do
  if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
fail "the node did not become idle within 20 s ($(sinfo -h -N -o '%T' 2>&1 | head -1))"
