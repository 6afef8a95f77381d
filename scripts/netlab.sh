#!/usr/bin/env bash
# A cluster of emulated hosts on one machine, for the multi-host tests
# (tests/integration/netlab_test.cpp) and for trying multi-host launches by hand.
#
#   scripts/netlab.sh up N [--rate R]     N hosts (1 to 4): network namespaces <lab>-h0 .. h<N-1>,
#                                         each with one link (a veth pair) to one bridge <lab>-br,
#                                         address <subnet>.<i+1>/24 on its eth0, its own loopback,
#                                         no other route; --rate shapes every link (tc tbf, both
#                                         directions), e.g. 200mbit, 1gbit, 1mbit
#   scripts/netlab.sh down                removes the lab: kills every process in its hosts, then
#                                         the namespaces, the veths and the bridge
#   scripts/netlab.sh exec H CMD...       runs CMD on host H (0..N-1, or its name <lab>-h<H>) with its own host name
#                                         (<lab>-h<i>, a UTS namespace of its own) and network
#   scripts/netlab.sh addr H              prints host H's address
#   scripts/netlab.sh link H up|down      restores or cuts host H's link (a pulled cable)
#   scripts/netlab.sh rate H R|off        shapes host H's link to R (both directions), or unshapes it
#   scripts/netlab.sh kill H              kills every process of host H (a host lost)
#   scripts/netlab.sh check               exit 0 when this machine can make a lab (root, iproute2,
#                                         namespaces, veth, bridge, tbf); else the reason, exit 3
#
# Options (before or after the command): --lab NAME (default ddpl; at most 8 characters, so that
# interface names fit Linux's 15), --subnet A.B.C (default 10.77.0), --owner PID (up leaves a
# watchdog that takes the lab down when PID is gone: a test that crashes leaves no namespace).
# The environment may give them as DDPLAB_NETLAB, DDPLAB_NETLAB_SUBNET.
#
# Runs as root. The kernel must have network namespaces, veth, bridges and the tbf qdisc; netem
# (delay, loss) is not used, as some kernels lack it.
# Exit codes: 0 ok; 1 a step failed (the message names it); 2 usage; 3 this machine cannot make a lab.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin

die() { echo "netlab: $*" >&2; exit "${EXIT:-1}"; }
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

lab=${DDPLAB_NETLAB:-ddpl}
subnet=${DDPLAB_NETLAB_SUBNET:-10.77.0}
owner=""
rate=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --lab) lab=${2:?--lab needs a name}; shift 2 ;;
    --subnet) subnet=${2:?--subnet needs A.B.C}; shift 2 ;;
    --owner) owner=${2:?--owner needs a pid}; shift 2 ;;
    --rate) rate=${2:?--rate needs a rate such as 200mbit}; shift 2 ;;
    -h|--help) usage ;;
    *) args+=("$1"); shift ;;
  esac
done
[ ${#args[@]} -gt 0 ] || usage
[ ${#lab} -le 8 ] || EXIT=2 die "--lab $lab: at most 8 characters (interface names are limited to 15)"
[[ $subnet =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || EXIT=2 die "--subnet $subnet: expected three numbers such as 10.77.0"

ns() { echo "$lab-h$1"; }
host_ns() {
  [[ ${1:-} =~ ^$lab-h([0-9])$ ]] && set -- "${BASH_REMATCH[1]}"
  [[ ${1:-} =~ ^[0-9]$ ]] || EXIT=2 die "host '${1:-}': expected a host number 0..3 or its name $lab-h<n>"
  ip netns list | grep -q "^$(ns "$1")\b" || die "no host $1 in lab $lab (scripts/netlab.sh up first)"
  ns "$1"
}
hosts() { ip netns list | sed -n "s/^\($lab-h[0-9]\)\b.*/\1/p"; }

check() {
  [ "$(id -u)" = 0 ] || { echo "netlab: needs root (network namespaces)"; return 3; }
  command -v ip >/dev/null && command -v tc >/dev/null || { echo "netlab: needs iproute2 (ip, tc)"; return 3; }
  local probe="$lab-probe" out
  if ! out=$(ip netns add "$probe" 2>&1); then echo "netlab: cannot make a network namespace: $out"; return 3; fi
  local ok=0
  if ! out=$(ip link add "$lab-pa" type veth peer name "$lab-pb" netns "$probe" 2>&1); then
    echo "netlab: cannot make a veth pair: $out"; ok=3
  elif ! out=$(tc qdisc add dev "$lab-pa" root tbf rate 100mbit burst 128kb latency 50ms 2>&1); then
    echo "netlab: cannot shape a link with tc tbf: $out"; ok=3
  elif ! out=$(ip link add "$lab-pbr" type bridge 2>&1); then
    echo "netlab: cannot make a bridge: $out"; ok=3
  fi
  ip link del "$lab-pbr" 2>/dev/null || true
  ip link del "$lab-pa" 2>/dev/null || true
  ip netns del "$probe" 2>/dev/null || true
  return $ok
}

# tbf on one interface: the bucket holds 10 ms at the rate (at least 16 KiB), the queue 100 ms.
shape() {
  local where=("$@") dev=${!#} r=$rate_arg
  unset 'where[${#where[@]}-1]'
  if [ "$r" = off ]; then
    "${where[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
    return
  fi
  local bits
  bits=$(python3 -c "import re,sys; m=re.fullmatch(r'(\d+(?:\.\d+)?)([kmg]?)bit','$r'.lower()); sys.exit(1) if not m else print(int(float(m[1])*{'':1,'k':1e3,'m':1e6,'g':1e9}[m[2]]))") ||
    EXIT=2 die "rate '$r': expected a number and kbit, mbit or gbit, e.g. 200mbit"
  local burst=$(( bits / 800 > 16384 ? bits / 800 : 16384 ))
  "${where[@]}" tc qdisc replace dev "$dev" root tbf rate "$r" burst "$burst" latency 100ms
}
shape_host() {
  rate_arg=$2
  shape ip netns exec "$(ns "$1")" "eth0"
  shape "$lab-h$1"
}

up() {
  local n=${1:?up needs the number of hosts}
  [[ $n =~ ^[1-4]$ ]] || EXIT=2 die "up $n: 1 to 4 hosts"
  local reason
  reason=$(check) || EXIT=3 die "${reason#netlab: }"
  down >/dev/null 2>&1 || true
  ip link add "$lab-br" type bridge
  ip link set "$lab-br" up
  for ((i = 0; i < n; i++)); do
    local h
    h=$(ns "$i")
    ip netns add "$h"
    ip link add "$h" type veth peer name eth0 netns "$h"
    ip link set "$h" master "$lab-br"
    ip link set "$h" up
    ip netns exec "$h" ip link set lo up
    ip netns exec "$h" ip addr add "$subnet.$((i + 1))/24" dev eth0
    ip netns exec "$h" ip link set eth0 up
    [ -z "$rate" ] || shape_host "$i" "$rate"
  done
  # A bridge without STP forwards at once; wait only for every link to be up (carrier on both ends).
  for ((i = 0; i < n; i++)); do
    local t=0
    until [ "$(ip netns exec "$(ns "$i")" cat /sys/class/net/eth0/operstate)" = up ]; do
      t=$((t + 1)); [ $t -lt 50 ] || die "host $i: eth0 did not come up"
      sleep 0.1
    done
  done
  if [ -n "$owner" ]; then
    setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; '$0' --lab '$lab' down" \
      </dev/null >/dev/null 2>&1 &
  fi
  echo "netlab: lab $lab up: $n hosts $(for ((i = 0; i < n; i++)); do printf '%s=%s ' "$(ns "$i")" "$subnet.$((i + 1))"; done)${rate:+links shaped to $rate}"
}

kill_host() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
}

down() {
  for h in $(hosts); do
    kill_host "$h"
    ip link del "$h" 2>/dev/null || true
    ip netns del "$h"
  done
  ip link del "$lab-br" 2>/dev/null || true
  echo "netlab: lab $lab down"
}

cmd=${args[0]}
set -- "${args[@]:1}"
case "$cmd" in
  check) reason=$(check) || { echo "$reason" >&2; exit 3; } ;;
  up) up "$@" ;;
  down) down ;;
  exec)
    h=$(host_ns "${1:-}")
    shift
    [ $# -gt 0 ] || EXIT=2 die "exec $h: no command"
    exec ip netns exec "$h" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$h" "$@"
    ;;
  addr) h=$(host_ns "${1:-}"); echo "$subnet.$((${h##*-h} + 1))" ;;
  link)
    h=$(host_ns "${1:-}")
    case "${2:-}" in up|down) ip link set "$h" "$2" ;; *) EXIT=2 die "link $1: up or down" ;; esac
    ;;
  rate) h=$(host_ns "${1:-}"); shape_host "${h##*-h}" "${2:?rate needs a rate or off}" ;;
  kill) kill_host "$(host_ns "${1:-}")" ;;
  *) EXIT=2 die "unknown command '$cmd' (up, down, exec, addr, link, rate, kill, check)" ;;
esac
