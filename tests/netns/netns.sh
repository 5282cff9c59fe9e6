#!/usr/bin/env bash
# Network namespaces as hosts: a small shaped network on one machine, for multi-host runs of
# gyre (`gyre run --rsh-agent tests/netns/netns-rsh`).
#
#   netns.sh up    PREFIX N [--rate RATE] [--delay DELAY] [--burst BYTES] [--require-delay]
#                           [--owner PID]
#   netns.sh down  PREFIX N
#   netns.sh info  PREFIX       # prints SUBNET, BRIDGE_ADDR, HOSTS, RATE, DELAY (shell variables)
#   netns.sh check PREFIX       # measures round-trip time and throughput PREFIX1 -> PREFIX2
#   netns.sh gc                 # removes every set whose --owner process has exited
#
# `up` creates the namespaces PREFIX1..PREFIXN ("hosts") and, in the root namespace, a bridge
# gybR with the address 10.R.0.254/24, so a launcher in the root namespace reaches every host.
# Each host has loopback up, one veth link named gy0 on the bridge with the address 10.R.0.k/24
# (`--network-interface gy0` means the same on every host) and a default route through the bridge,
# so every address of the root namespace is reachable, as a host reaches others through its gateway. R (32..231) is derived
# from PREFIX and moved on when that subnet or bridge is taken, so runs with different prefixes
# can run at once. Both ends of every link are shaped on egress with tc, like a switch port:
# RATE (default 1gbit) with a token bucket (tbf, BYTES of burst, default 128k) and DELAY in each
# direction (default 0.1ms, so 0.2 ms between two hosts, one way) with netem. A kernel without
# netem (CONFIG_NET_SCH_NETEM) gets the rate only, with a warning, or exit 77 with
# --require-delay. `up` removes a stale set of the same PREFIX first.
#
# `down` kills every process in the namespaces and removes the namespaces, links and bridge. It
# is idempotent and also removes hosts beyond N that an earlier `up` created. A test that may be
# killed before it can call `down` passes `--owner $$` (its own pid) to `up` and runs `gc` first,
# which removes the sets of owners that are gone.
#
# Exit codes: 0 done; 77 namespaces cannot be created here (not root, no CAP_NET_ADMIN, no `ip`
# or `tc`, no veth/bridge/tbf in the kernel), with the reason on stderr: tests turn it into a
# skip; 2 bad usage; 1 any other failure (after `up` has removed what it created).
set -euo pipefail

readonly SKIP=77
readonly STATE_DIR=/run/gyre-netns
readonly LOCK=/run/lock/gyre-netns.lock
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
  echo "netns.sh: $*" >&2
  exit 1
}
skip() {
  echo "netns.sh: cannot create network namespaces here: $*" >&2
  exit "$SKIP"
}
usage() {
  sed -n '4,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

check_prefix() {
  [[ "$1" =~ ^[A-Za-z][A-Za-z0-9_-]{0,11}$ ]] ||
    { echo "netns.sh: PREFIX must be a letter then up to 11 letters, digits, '-' or '_': '$1'" >&2; exit 2; }
}
check_count() {
  if ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] || [ "$1" -gt 250 ]; then
    echo "netns.sh: N must be in 1..250: '$1'" >&2
    exit 2
  fi
}

# The state of a set: $STATE_DIR/PREFIX holds NAME=VALUE lines: R, N, RATE, DELAY, OWNER and
# OWNER_START.
state_file() { echo "$STATE_DIR/$1"; }
# The value of $2 in state file $1, or nothing.
state_var() { sed -n "s/^$2=//p" "$1" 2>/dev/null || true; }

namespace_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qxF -- "$1"; }

# ---- down -------------------------------------------------------------------------------------

down() {
  local prefix=$1 count=$2 r="" n=0
  local state
  state=$(state_file "$prefix")
  if [ -f "$state" ]; then
    r=$(state_var "$state" R)
    n=$(state_var "$state" N)
  fi
  if [ "${n:-0}" -gt "$count" ]; then count=$n; fi
  local k ns pids
  for ((k = 1; k <= count; k++)); do
    ns=$prefix$k
    namespace_exists "$ns" || continue
    # Everything still running in the host: the workers and agents of a run that did not finish.
    for _ in 1 2 3; do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -z "$pids" ] && break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      sleep 0.1
    done
    # The root end first: deleting a namespace removes its links only later, asynchronously.
    if [ -n "$r" ]; then ip link del "gyv${r}k$k" 2>/dev/null || true; fi
    ip netns del "$ns" 2>/dev/null || true
  done
  if [ -n "$r" ]; then
    ip link del "gyb$r" 2>/dev/null || true
  fi
  rm -f "$state"
}

# ---- up ---------------------------------------------------------------------------------------

preflight() {
  command -v ip >/dev/null || skip "the 'ip' command (iproute2) is not installed"
  command -v tc >/dev/null || skip "the 'tc' command (iproute2) is not installed"
  [ "$(id -u)" -eq 0 ] || skip "this needs root (ip netns add, veth, bridge, tc); running as uid $(id -u)"
  mkdir -p "$STATE_DIR" "$(dirname "$LOCK")" 2>/dev/null || skip "cannot create $STATE_DIR"
}

# Chooses R for PREFIX: a free bridge name gybR and a free subnet 10.R.0.0/24, starting from a
# hash of PREFIX. Must run under the lock.
choose_subnet() {
  local prefix=$1 r tries
  r=$(( $(printf '%s' "$prefix" | cksum | awk '{print $1}') % 200 + 32 ))
  for ((tries = 0; tries < 200; tries++)); do
    if ! ip link show "gyb$r" >/dev/null 2>&1 &&
      ! ip -4 -o addr show 2>/dev/null | grep -qF " 10.$r." &&
      ! ip -4 route show 2>/dev/null | grep -q "^10\.$r\."; then
      echo "$r"
      return 0
    fi
    r=$(( (r - 32 + 1) % 200 + 32 ))
  done
  return 1
}

# Shapes egress of device $2 (in namespace $1, or the root namespace when $1 is empty).
shape() {
  local ns=$1 dev=$2
  local -a tcn=(tc)
  [ -n "$ns" ] && tcn=(tc -n "$ns")
  if [ "$use_netem" = 1 ] || [ "$have_tbf" = 0 ]; then
    "${tcn[@]}" qdisc add dev "$dev" root netem delay "$delay" rate "$rate" limit 10000
  else
    "${tcn[@]}" qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" limit 1mb
  fi
}

# Tries a throwaway veth pair: skips (77) when links cannot be created or shaped; sets have_netem.
probe_links() {
  local a="gyq$$a" b="gyq$$b"
  ip link add "$a" type veth peer name "$b" 2>/dev/null ||
    skip "cannot create a veth pair (no CAP_NET_ADMIN, or no veth support in the kernel)"
  have_netem=0 have_tbf=0
  tc qdisc add dev "$a" root netem delay 1ms 2>/dev/null && have_netem=1
  tc qdisc add dev "$b" root tbf rate 1gbit burst 128k limit 1mb 2>/dev/null && have_tbf=1
  ip link del "$a" 2>/dev/null || true
  [ "$have_tbf" = 1 ] || [ "$have_netem" = 1 ] || skip "tc can shape links with neither tbf nor netem"
}

# EXIT trap of `up`: a failed `up` leaves nothing behind.
undo_up() {
  if [ "$1" -ne 0 ]; then down "$up_prefix" "$up_count"; fi
  exit "$1"
}

up() {
  local prefix=$1 count=$2
  up_prefix=$1 up_count=$2
  preflight
  exec {lockfd}>"$LOCK"
  flock -w 30 "$lockfd" || die "another netns.sh holds $LOCK for more than 30 s"

  down "$prefix" "$count"  # a stale set of the same prefix
  probe_links
  use_netem=0
  if [ "$delay" != 0 ] && [ "$delay" != 0ms ]; then
    if [ "$have_netem" = 1 ]; then
      use_netem=1
    elif [ "$require_delay" = 1 ]; then
      skip "the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so links cannot be delayed by $delay"
    else
      echo "netns.sh: warning: the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): links are" \
        "shaped to $rate with tbf but NOT delayed by $delay; round trips take only the veth's own few tens of microseconds" >&2
    fi
  fi

  local r
  r=$(choose_subnet "$prefix") || die "no free subnet 10.R.0.0/24 with R in 32..231"
  local state
  state=$(state_file "$prefix")
  local shaped_delay=$delay
  [ "$use_netem" = 1 ] || shaped_delay=0
  printf 'R=%s\nN=%s\nRATE=%s\nDELAY=%s\nOWNER=%s\nOWNER_START=%s\n' "$r" "$count" "$rate" "$shaped_delay" \
    "$owner" "$(start_time "$owner")" >"$state"
  # From here on, a failure removes everything this call created.
  trap 'undo_up $?' EXIT

  local bridge="gyb$r"
  ip link add "$bridge" type bridge 2>/dev/null || skip "cannot create a bridge (no CAP_NET_ADMIN, or no bridge support)"
  ip link set "$bridge" alias "gyre-netns:$prefix"
  ip addr add "10.$r.0.254/24" dev "$bridge"
  ip link set "$bridge" up

  local k ns veth
  for ((k = 1; k <= count; k++)); do
    ns=$prefix$k
    veth="gyv${r}k$k"
    ip netns add "$ns" 2>/dev/null || skip "'ip netns add $ns' failed (no CAP_NET_ADMIN, or /run/netns is not writable)"
    ip link add "$veth" type veth peer name gy0 netns "$ns" 2>/dev/null || skip "cannot create a veth pair (no veth support)"
    ip link set "$veth" master "$bridge"
    ip link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.$r.0.$k/24" dev gy0
    ip -n "$ns" link set gy0 up
    # Like a host's default gateway: the launcher's other addresses are reachable too.
    ip -n "$ns" route add default via "10.$r.0.254" dev gy0
    shape "$ns" gy0 2>/dev/null || skip "tc cannot shape gy0 in $ns (no tbf/netem qdisc in the kernel)"
    shape "" "$veth"
  done
  wait_for_links "$prefix" "$count"
  trap - EXIT
  info "$prefix"
}

# veth links report carrier asynchronously: wait until both ends of every link are up, so the
# first connection of a run does not race the link.
wait_for_links() {
  local prefix=$1 count=$2 k r
  r=$(state_var "$(state_file "$prefix")" R)
  for ((k = 1; k <= count; k++)); do
    local t
    for ((t = 0; t < 50; t++)); do
      ip -n "$prefix$k" -o link show gy0 | grep -q "state UP" &&
        ip -o link show "gyv${r}k$k" | grep -q "state UP" && break
      sleep 0.1
    done
  done
}

info() {
  local prefix=$1 state r n
  state=$(state_file "$prefix")
  [ -f "$state" ] || die "no namespace set with prefix '$prefix' (run: netns.sh up $prefix N)"
  r=$(state_var "$state" R)
  n=$(state_var "$state" N)
  local hosts="" k
  for ((k = 1; k <= n; k++)); do hosts+="${hosts:+ }$prefix$k"; done
  printf 'SUBNET=10.%s.0.0/24\nBRIDGE_ADDR=10.%s.0.254\nHOSTS="%s"\nRATE=%s\nDELAY=%s\nINTERFACE=gy0\n' \
    "$r" "$r" "$hosts" "$(state_var "$state" RATE)" "$(state_var "$state" DELAY)"
}

check() {
  local prefix=$1 state r
  state=$(state_file "$prefix")
  [ -f "$state" ] || die "no namespace set with prefix '$prefix'"
  r=$(state_var "$state" R)
  [ "$(state_var "$state" N)" -ge 2 ] || die "check needs two hosts"
  command -v python3 >/dev/null || die "check needs python3"
  local server="10.$r.0.2" port=45111
  ip netns exec "${prefix}2" timeout 60 python3 "$here/linkcheck.py" serve "$server" "$port" &
  check_server=$!
  trap 'kill "$check_server" 2>/dev/null || true' EXIT
  ip netns exec "${prefix}1" timeout 60 python3 "$here/linkcheck.py" measure "$server" "$port"
  wait "$check_server"
  trap - EXIT
}

# ---- gc ---------------------------------------------------------------------------------------

# The start time of process $1 (field 22 of /proc/PID/stat), or nothing: with the pid it names
# one process, even after the pid is reused.
start_time() {
  local line
  [ -n "$1" ] && line=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  line=${line##*) }
  # shellcheck disable=SC2086
  set -- $line
  echo "${20}"
}

gc() {
  local state prefix owner start n
  for state in "$STATE_DIR"/*; do
    [ -f "$state" ] || continue
    prefix=${state##*/}
    owner=$(state_var "$state" OWNER)
    start=$(state_var "$state" OWNER_START)
    n=$(state_var "$state" N)
    [ -n "$owner" ] || continue  # no owner: only `down` removes it
    if [ -z "$start" ] || [ "$(start_time "$owner")" != "$start" ]; then
      echo "netns.sh: removing '$prefix' (its owner, process $owner, has exited)" >&2
      down "$prefix" "$n"
    fi
  done
}

# ---- main -------------------------------------------------------------------------------------

if [ "${1:-}" = gc ]; then
  [ "$(id -u)" -eq 0 ] || skip "this needs root"
  command -v ip >/dev/null || skip "the 'ip' command (iproute2) is not installed"
  mkdir -p "$STATE_DIR" "$(dirname "$LOCK")"
  exec {lockfd}>"$LOCK"
  flock -w 30 "$lockfd" || die "another netns.sh holds $LOCK for more than 30 s"
  gc
  exit 0
fi
[ $# -ge 2 ] || usage
cmd=$1 prefix=$2
shift 2
check_prefix "$prefix"
rate=1gbit delay=0.1ms burst=128k require_delay=0 owner=""
case "$cmd" in
  up | down)
    [ $# -ge 1 ] || usage
    count=$1
    shift
    check_count "$count"
    while [ $# -gt 0 ]; do
      case "$1" in
        --rate) rate=${2:?--rate needs a value}; shift 2 ;;
        --delay) delay=${2:?--delay needs a value}; shift 2 ;;
        --burst) burst=${2:?--burst needs a value}; shift 2 ;;
        --require-delay) require_delay=1; shift ;;
        --owner) owner=${2:?--owner needs a pid}; shift 2 ;;
        *) echo "netns.sh: unknown option '$1'" >&2; exit 2 ;;
      esac
    done
    if [ "$cmd" = up ]; then
      up "$prefix" "$count"
    else
      [ "$(id -u)" -eq 0 ] || skip "this needs root"
      command -v ip >/dev/null || skip "the 'ip' command (iproute2) is not installed"
      mkdir -p "$(dirname "$LOCK")"
      exec {lockfd}>"$LOCK"
      flock -w 30 "$lockfd" || die "another netns.sh holds $LOCK for more than 30 s"
      down "$prefix" "$count"
    fi
    ;;
  info) info "$prefix" ;;
  check) check "$prefix" ;;
  *) usage ;;
esac
