#!/usr/bin/env bash
# A real etcd cluster (Debian's etcd-server) for the tests, on free loopback ports:
#
#   tests/etcd/etcd.sh start DIR N   # N members (1 or 3); prints the client endpoints, "h:p,h:p,..."
#   tests/etcd/etcd.sh kill DIR I    # SIGKILLs member I (from 0): a host lost
#   tests/etcd/etcd.sh stop DIR      # stops every member
#
# start returns once every member reports itself healthy. Each member's data and log live in
# DIR/mI, each runs in a session of its own (it outlives this script, not the test: stop kills
# it), and nothing of a system etcd (a service the package may have started) is touched. Short
# heartbeats and elections (50 ms, 500 ms) let a cluster that lost a member elect a leader fast.
# Installs etcd-server when missing; exits 77 when it is missing and cannot be installed (the
# caller skips, saying why), 1 when the cluster does not become healthy (the logs are printed).
set -euo pipefail
usage="usage: etcd.sh start DIR N | kill DIR I | stop DIR"
action=${1:?$usage}
dir=${2:?$usage}

# A zombie counts as gone: a test process that reaps orphans (a subreaper) may not have yet.
alive() {
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

kill_member() {
  local pidfile=$dir/m$1.pid signal=$2
  [ -s "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

case "$action" in
  stop)
    for pidfile in "$dir"/m*.pid; do
      [ -e "$pidfile" ] || continue
      member=${pidfile##*/m}
      kill_member "${member%.pid}" TERM
    done
    exit 0
    ;;
  kill)
    kill_member "${3:?$usage}" KILL
    exit 0
    ;;
  start) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
members=${3:?$usage}

source "$(dirname "$0")/../support/ensure-packages.sh"
ensure_packages "etcd.sh: etcd" etcd -- etcd-server

# Free ports are picked by binding port 0 and letting go: another process may take one before
# etcd binds it, so a cluster that does not come up on its ports is tried again on new ones.
start_cluster() {
  rm -rf "$dir"
  mkdir -p "$dir"
  read -r -a ports <<< "$(/usr/bin/python3 -c "
import socket
socks = [socket.socket() for _ in range(2 * $members)]
for s in socks: s.bind(('127.0.0.1', 0))
print(' '.join(str(s.getsockname()[1]) for s in socks))")"
  local cluster="" i client peer
  for ((i = 0; i < members; i++)); do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[2 * i + 1]}"
  done
  endpoints=""
  for ((i = 0; i < members; i++)); do
    client=${ports[2 * i]} peer=${ports[2 * i + 1]}
    endpoints+="${endpoints:+,}127.0.0.1:$client"
    setsid etcd --name "m$i" --data-dir "$dir/m$i" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "gyre-test-$$" \
      --heartbeat-interval 50 --election-timeout 500 --logger zap --log-level warn \
      > "$dir/m$i.log" 2>&1 &
    echo $! > "$dir/m$i.pid"
  done
  local healthy="import json, sys, urllib.request
for e in '$endpoints'.split(','):
    r = json.load(urllib.request.urlopen('http://' + e + '/health', timeout=1))
    if r.get('health') != 'true': sys.exit(1)"
  for _ in $(seq 300); do
    /usr/bin/python3 -c "$healthy" 2>/dev/null && return 0
    # A member that exited (a port taken) will not come up: try again at once.
    for pidfile in "$dir"/m*.pid; do alive "$(cat "$pidfile")" || return 1; done
    sleep 0.1
  done
  return 1
}

for attempt in 1 2 3; do
  if start_cluster; then
    echo "$endpoints"
    exit 0
  fi
  [ "$attempt" -lt 3 ] && "$0" stop "$dir"
done
echo "etcd.sh: the $members-member etcd cluster at $endpoints did not become healthy (3 tries)" >&2
tail -n 20 "$dir"/m*.log >&2
"$0" stop "$dir"
exit 1
