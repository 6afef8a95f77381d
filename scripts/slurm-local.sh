#!/usr/bin/env bash
# A real single-node SLURM cluster on localhost, for the tests (tests/integration/slurm_test.cpp)
# and for trying `srun`/`sbatch` by hand.
#
#   scripts/slurm-local.sh start [DIR]   install the packages if missing, start munged, slurmctld
#                                        and slurmd with everything under DIR (default: a new
#                                        temp dir), wait for the node to be idle; prints the
#                                        `export SLURM_CONF=...` line clients need (also in DIR/env)
#   scripts/slurm-local.sh status DIR    which daemons run; the node's state (exit 0: all up)
#   scripts/slurm-local.sh stop DIR      cancel every job, wait for an empty queue, then stop the
#                                        daemons this script started (by the pids in DIR only)
#
# Runs as root, without systemd: Debian's slurmctld, slurmd, slurm-client and munge packages
# (apt-get install --no-install-recommends; their service start fails harmlessly without an init
# system). Nothing outside DIR is written besides the packages: one DIR per cluster, with its own
# munge key and socket, state, spool, logs and TCP ports (chosen free, above the ephemeral range).
# Job ids start at a random number, so a job's `12910 + SLURM_JOB_ID % 20000` port (ddplab's
# default master port under srun) differs between clusters.
#
# Environment: DDPLAB_SLURM_OWNER_PID=<pid> makes start leave a watchdog that stops the cluster
# when that process is gone (a test that crashes leaves no daemons). DDPLAB_SLURM_START_TIMEOUT
# (seconds, default 30) bounds the wait for an idle node.
#
# Exit codes: 0 ok; 1 the cluster did not start or stop (the message names the logs); 2 usage;
# 3 the SLURM/munge packages are missing and could not be installed.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # the daemons live in sbin, which a non-login PATH may lack

die() { echo "slurm-local: $*" >&2; exit "${EXIT:-1}"; }
usage() { echo "usage: $0 start [DIR] | status DIR | stop DIR" >&2; exit 2; }

# --- packages ---------------------------------------------------------------------------------

have_packages() { command -v slurmctld && command -v slurmd && command -v srun && command -v munged; } >/dev/null

install_packages() {
  have_packages && return 0
  [ "$(id -u)" = 0 ] || EXIT=3 die "the SLURM packages are missing and installing them needs root (run as root, or: apt-get install slurmctld slurmd slurm-client munge)"
  command -v apt-get >/dev/null || EXIT=3 die "the SLURM packages are missing and there is no apt-get to install them"
  local pkgs=(slurmctld slurmd slurm-client munge) log
  log=$(mktemp /tmp/slurm-local-apt.XXXXXX)
  echo "slurm-local: installing ${pkgs[*]} (log: $log)" >&2
  local apt=(apt-get -o DPkg::Lock::Timeout=300 -y --no-install-recommends)
  if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >"$log" 2>&1; then
    # The package lists may be missing or stale (a fresh container): update once and retry.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update >>"$log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${pkgs[@]}" >>"$log" 2>&1 || true
  fi
  # The packages' service start fails without an init system; what matters is the binaries.
  have_packages || EXIT=3 die "apt-get install ${pkgs[*]} failed; the last lines of $log:
$(tail -n 5 "$log")"
  rm -f "$log"
}

# --- helpers ----------------------------------------------------------------------------------

# TCP ports something listens on or uses, from /proc (no tools needed).
used_ports() {
  local sl local_addr rest
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r sl local_addr rest; do
    if [[ $local_addr == *:* ]]; then echo $((16#${local_addr##*:})); fi
  done | sort -u
}

# A port in 61000..64999 (above Linux's default ephemeral range) that nothing uses and that is
# not in "$@".
free_port() {
  local used p i
  used=$(used_ports)
  for i in $(seq 1 200); do
    p=$((61000 + RANDOM % 4000))
    grep -qx "$p" <<<"$used" && continue
    [[ " $* " == *" $p "* ]] && continue
    echo "$p"
    return 0
  done
  die "no free TCP port in 61000..64999"
}

# The pid in file $1 if that process is alive and its command line mentions $2.
live_pid() {
  local file=$1 mark=$2 pid
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$mark" || return 1
  echo "$pid"
}

# The live pids of daemon $2 of the cluster in $1: the one its own pid file names and the one
# this script launched (DIR/NAME.launched: a daemon that dies before it writes its pid file).
daemon_pids() {
  local dir=$1 name=$2 f
  for f in "$dir/$name.pid" "$dir/$name.launched"; do live_pid "$f" "$dir/" || true; done | sort -u
}

# Sends SIGTERM to daemon $2 of the cluster in $1, then SIGKILL if it is still alive after $3
# seconds.
stop_daemon() {
  local dir=$1 name=$2 grace=$3 pids pid i
  pids=$(daemon_pids "$dir" "$name")
  for pid in $pids; do
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 $((grace * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-local: $name (pid $pid) ignored SIGTERM for ${grace} s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    if kill -0 "$pid" 2>/dev/null; then die "$name (pid $pid) survived SIGKILL"; fi
  done
  rm -f "$dir/$name.pid" "$dir/$name.launched"
}

abs_dir() { mkdir -p "$1" && cd "$1" && pwd -P; }

# --- start ------------------------------------------------------------------------------------

write_munge_key() {
  local key=$1
  (umask 077 && head -c 1024 /dev/urandom >"$key")
  chmod 400 "$key"
}

# munged refuses a socket whose directories, from / down, are not all searchable by everyone.
check_searchable() {
  local p=$1
  while [ "$p" != / ] && [ -n "$p" ]; do
    [ "$(( $(stat -c '%#a' "$p") & 1 ))" = 1 ] ||
      die "munged needs every directory above its socket searchable by all, and $p is mode $(stat -c %a "$p") (chmod o+x $p, or start in another DIR)"
    p=$(dirname "$p")
  done
}

start_munged() {
  local d=$1/munge
  mkdir -p "$d"
  chmod 755 "$d"
  check_searchable "$d"
  [ -s "$d/munge.key" ] || write_munge_key "$d/munge.key"
  rm -f "$1/munged.pid"
  munged --socket="$d/munge.socket" --pid-file="$1/munged.pid" --key-file="$d/munge.key" \
    --log-file="$d/munged.log" --seed-file="$d/munged.seed" </dev/null >>"$d/munged.out" 2>&1 ||
    die "munged did not start; see $d/munged.log and $d/munged.out:
$(tail -n 5 "$d/munged.log" "$d/munged.out" 2>/dev/null)"
}

# The node line `slurmd -C` prints, as NodeName=localhost (CPUs, boards, sockets, cores, threads,
# memory of this machine).
node_line() {
  local line
  line=$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=') || die "slurmd -C printed no NodeName line"
  sed -E 's/^NodeName=[^ ]+/NodeName=localhost/' <<<"$line"
}

write_conf() {
  local dir=$1 ctld_port=$2 slurmd_port=$3 first_job=$4 node
  mkdir -p "$dir/state" "$dir/spool"
  node=$(node_line)
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster whose every path is under $dir.
ClusterName=ddplab-local
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
FirstJobId=$first_job
$node
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
}

# Waits until sinfo shows the node idle; on a timeout, names the logs.
wait_idle() {
  local dir=$1 timeout=${DDPLAB_SLURM_START_TIMEOUT:-30} state="" i
  for i in $(seq 1 $((timeout * 10))); do
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    [ -n "$(daemon_pids "$dir" slurmctld)" ] || break
    [ -n "$(daemon_pids "$dir" slurmd)" ] || break
    sleep 0.1
  done
  die "the node did not become idle within ${timeout} s (sinfo: '${state:-no answer}'); see $dir/slurmctld.log, $dir/slurmd.log (and *.out beside them):
$(tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/slurmctld.out" "$dir/slurmd.out" 2>/dev/null)"
}

# Stops the cluster in $1 when process $2 is gone (a test that crashed), checking every second;
# in its own session, so that a Ctrl-C aimed at the owner does not stop it too.
cmd_watch() {
  local dir=$1 owner=$2
  while kill -0 "$owner" 2>/dev/null; do sleep 1; done
  cmd_stop "$dir"
}

start_watchdog() {
  local dir=$1 owner=$2
  setsid "$(readlink -f "$0")" watch "$dir" "$owner" </dev/null >>"$dir/watchdog.log" 2>&1 &
  echo $! >"$dir/watchdog.pid"
}

# Starts daemon $2 of the cluster in $1 (the rest of the arguments: its command) in the
# background, in its own session, and records its pid.
launch() {
  local dir=$1 name=$2
  shift 2
  setsid "$@" </dev/null >>"$dir/$name.out" 2>&1 &
  echo $! >"$dir/$name.launched"
}

cmd_start() {
  [ "$(id -u)" = 0 ] || die "runs as root (SlurmUser=root, munged's key and slurmd's job launch); you are $(id -un)"
  install_packages
  local dir
  if [ -n "${1:-}" ]; then dir=$(abs_dir "$1"); else dir=$(mktemp -d /tmp/ddplab-slurm.XXXXXX); fi
  local name
  for name in munged slurmctld slurmd; do
    [ -z "$(daemon_pids "$dir" "$name")" ] || die "a cluster already runs in $dir (stop it first: $0 stop $dir)"
  done
  # slurmctld kills whatever pid a stale pid file names: start with none.
  rm -f "$dir"/*.pid "$dir"/*.launched
  local ctld_port slurmd_port first_job
  ctld_port=$(free_port)
  slurmd_port=$(free_port "$ctld_port")
  first_job=$((1000 + RANDOM % 18000))
  export SLURM_CONF=$dir/slurm.conf
  write_conf "$dir" "$ctld_port" "$slurmd_port" "$first_job"
  # A start that fails half-way stops what it started.
  trap "stop_daemons '$dir' >/dev/null 2>&1" EXIT
  start_munged "$dir"
  if [ -n "${DDPLAB_SLURM_OWNER_PID:-}" ]; then start_watchdog "$dir" "$DDPLAB_SLURM_OWNER_PID"; fi
  # -D: stay in the foreground (of a background job); -c in slurmctld: no state from a last run.
  launch "$dir" slurmctld slurmctld -D -c -f "$dir/slurm.conf"
  launch "$dir" slurmd slurmd -D -N localhost -f "$dir/slurm.conf"
  wait_idle "$dir"
  trap - EXIT
  echo "slurm-local: a one-node cluster runs in $dir (stop: $0 stop $dir)" >&2
  echo "export SLURM_CONF=$dir/slurm.conf"
}

# --- status and stop --------------------------------------------------------------------------

need_dir() {
  [ -n "${1:-}" ] || usage
  [ -f "$1/slurm.conf" ] || die "$1: no slurm.conf (not a directory that '$0 start' made)"
  abs_dir "$1"
}

cmd_status() {
  local dir ok=0 name pids
  dir=$(need_dir "${1:-}")
  export SLURM_CONF=$dir/slurm.conf
  for name in munged slurmctld slurmd; do
    pids=$(daemon_pids "$dir" "$name")
    if [ -n "$pids" ]; then echo "$name: running (pid" $pids")"; else echo "$name: not running"; ok=1; fi
  done
  [ $ok = 0 ] && sinfo -h -o '%N %T %c' 2>/dev/null | sed 's/^/node: /' || true
  return $ok
}

# Cancels every job and waits (up to $2 s) for an empty queue: a killed slurmd leaves its
# slurmstepds running, so the steps must end first.
drain_queue() {
  local dir=$1 timeout=$2 jobs i
  [ -n "$(daemon_pids "$dir" slurmctld)" ] || return 0
  jobs=$(squeue -h -o %A 2>/dev/null || true)
  [ -n "$jobs" ] && scancel $jobs 2>/dev/null || true
  for i in $(seq 1 $((timeout * 10))); do
    [ -z "$(squeue -h -o %A 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  echo "slurm-local: warning: jobs still queued after ${timeout} s: $(squeue -h -o '%A %T' | tr '\n' ' ')" >&2
}

# Stops the watchdog (unless it is the caller), slurmd, slurmctld and munged of the cluster in $1.
stop_daemons() {
  local dir=$1 wpid
  if wpid=$(live_pid "$dir/watchdog.pid" "$dir") && [ "$wpid" != "$$" ]; then kill "$wpid" 2>/dev/null || true; fi
  rm -f "$dir/watchdog.pid"
  # slurmd first: it ignores SIGTERM once the controller is gone (hence the SIGKILL fallback).
  stop_daemon "$dir" slurmd 5
  stop_daemon "$dir" slurmctld 5
  stop_daemon "$dir" munged 5
}

cmd_stop() {
  local dir
  dir=$(need_dir "${1:-}")
  export SLURM_CONF=$dir/slurm.conf
  drain_queue "$dir" 20
  stop_daemons "$dir"
  echo "slurm-local: stopped the cluster in $dir" >&2
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  status) shift; cmd_status "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  watch) shift; cmd_watch "$@" ;;  # internal: the watchdog start leaves
  *) usage ;;
esac
