#!/usr/bin/env bash
# Parameter-server throughput versus the number of servers, across network-namespace hosts,
# against the bandwidth bound.
#
#   ps_bound.sh [--workers W] [--servers 1,2,4] [--floats N] [--seconds T] [--mode asp]
#               [--replication both|on|off] [--gyre PATH] [--rate RATE] [--timeout S]
#
# Creates W worker hosts and max(--servers) server hosts (tests/netns/netns.sh, one prefix,
# hosts P1..PW for the workers and P(W+1).. for the servers; default W 2, links 1gbit), measures
# the link with `netns.sh check`, then for each S of --servers runs
#   gyre run -H P1:1,...,PW:1 --servers S --server-hosts P(W+1),...,P(W+S) --rsh-agent netns-rsh
#       --network-interface gy0 --no-tag-output -- gyre bench ps --part throughput --json
#       --floats N --seconds T --mode M [--no-replication]
# (--replication both, the default: every S >= 2 with and without replication; with one server
# there is nothing to replicate, so its row is measured once) and prints a table: steps/s (every
# worker's steps added up, over the longest worker's timed seconds), the slowest worker's own
# steps/s, MB/s pushed + pulled, the speedup over 1 server (or the fewest), and the bound.
#
# The bound. A step of all W workers moves, per direction (each end of a link is shaped on egress,
# so a link carries RATE each way at once; pushes and pulls are in flight together): on a server
# link W*4N/S bytes (the workers' pushes of its share in, their pulls out), twice that with
# replication (each update also goes to the backup, the next server: its share in from the
# previous server, out to the next); on a worker link 4N (its push out, its pull in). So the
# workers' global steps/s is at most B / max(W*4N*(1+r)/S, 4N), r = 1 with replication and S >= 2,
# B = RATE in bytes/s; the table's steps/s, which adds the W workers up, at most W times that.
# (Counting both directions against one RATE, 2*W*4N/S and 2*4N, halves the bound.)
#
# Removes the hosts on exit, however it exits; the whole run is bounded by --timeout (default
# 900 s). Root only; exit 77 where namespaces cannot be created. Not a test: the numbers depend
# on the machine's load (every host shares this machine's cores).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
workers=2 servers=1,2,4 floats=4M seconds=5 mode=asp replication=both rate=1gbit timeout=900
gyre=$(cd "$here/../.." && pwd)/build/bin/gyre
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --floats) floats=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --replication) replication=$2; shift 2 ;;
    --gyre) gyre=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) sed -n '5,6p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2; exit 2 ;;
  esac
done
[ -x "$gyre" ] || { echo "ps_bound.sh: no gyre executable at $gyre (use --gyre)" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]?$ ]] || { echo "ps_bound.sh: --workers must be 1..99: '$workers'" >&2; exit 2; }
[[ "$servers" =~ ^[1-9][0-9]?(,[1-9][0-9]?)*$ ]] ||
  { echo "ps_bound.sh: --servers must be counts like 1,2,4: '$servers'" >&2; exit 2; }
case "$replication" in both | on | off) ;; *) echo "ps_bound.sh: --replication both, on or off" >&2; exit 2 ;; esac
IFS=, read -r -a counts <<<"$servers"
max_servers=0
for s in "${counts[@]}"; do [ "$s" -gt "$max_servers" ] && max_servers=$s; done
hosts=$((workers + max_servers))

prefix="gyp$$"
out=$(mktemp -d)
cleanup() {
  "$here/netns.sh" down "$prefix" "$hosts" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
deadline=$((SECONDS + timeout))

status=0
"$here/netns.sh" up "$prefix" "$hosts" --rate "$rate" --owner $$ >"$out/info" || status=$?
[ "$status" -eq 0 ] || exit "$status"  # 77: no namespaces here
link=$("$here/netns.sh" check "$prefix")

workerlist="" serverhosts=()
for ((k = 1; k <= workers; k++)); do workerlist+="${workerlist:+,}$prefix$k:1"; done
for ((k = 1; k <= max_servers; k++)); do serverhosts+=("$prefix$((workers + k))"); done

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$out/rows.jsonl"
for s in "${counts[@]}"; do
  variants=()
  case "$replication" in
    both) if [ "$s" -ge 2 ]; then variants=(on off); else variants=(on); fi ;;
    *) variants=("$replication") ;;
  esac
  for v in "${variants[@]}"; do
    left=$((deadline - SECONDS))
    [ "$left" -gt 30 ] || { echo "ps_bound.sh: --timeout $timeout s reached; stopping" >&2; exit 124; }
    list=$(IFS=,; echo "${serverhosts[*]:0:$s}")
    cmd=("$gyre" run -H "$workerlist" --servers "$s" --server-hosts "$list" --rsh-agent "$here/netns-rsh"
      --network-interface gy0 --no-tag-output --timeout "$left"
      -- "$gyre" bench ps --part throughput --json --floats "$floats" --seconds "$seconds" --mode "$mode")
    [ "$v" = off ] && cmd+=(--no-replication)
    echo "# ${cmd[*]}"
    if ! timeout "$((left + 30))" "${cmd[@]}" >"$out/run.out" 2>"$out/run.err"; then
      echo "ps_bound.sh: the run with $s server(s) failed; its output:" >&2
      cat "$out/run.out" "$out/run.err" >&2
      exit 1
    fi
    grep '^{' "$out/run.out" >>"$out/rows.jsonl" ||
      { echo "ps_bound.sh: no JSON row from the run with $s server(s):" >&2; cat "$out/run.out" "$out/run.err" >&2; exit 1; }
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out/rows.jsonl" "$rate" "$link" "$(cat "$out/info")" <<'EOF'
import json, re, sys
rows_file, rate, link, info = sys.argv[1:5]
m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)(bit|bps)", rate.lower())
if not m:
    sys.exit(f"cannot read the rate '{rate}'")
B = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / (8 if m.group(3) == "bit" else 1)
rows = [json.loads(line) for line in open(rows_file) if line.startswith("{")]
ref = min(rows, key=lambda r: (r["servers"], not r["replicate"]))
W, N = rows[0]["workers"], rows[0]["floats"]
print(f"# {info.splitlines()[0]}; link check: {link}")
print(f"# W = {W} workers, N = {N} floats ({4 * N / 1e6:.1f} MB), mode {rows[0]['mode']}, "
      f"B = {B / 1e6:.1f} MB/s each way; bound = W * B / max(W*4N*(1+r)/S, 4N), r = 1 when replicated")
print(f"| {'servers':>7} | {'repl':>4} | {'steps/s':>8} | {'worker min':>10} | {'MB/s':>7} | {'speedup':>7} "
      f"| {'bound':>7} | {'of bound':>8} | {'busiest link':>12} |")
print(f"|{'-' * 9}|{'-' * 6}|{'-' * 10}|{'-' * 12}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 10}|{'-' * 14}|")
for r in rows:
    S = r["servers"]
    rep = 1 if r["replicate"] and S >= 2 else 0
    server_bytes, worker_bytes = W * 4 * N * (1 + rep) / S, 4 * N
    bound = W * B / max(server_bytes, worker_bytes)
    which = "server" if server_bytes > worker_bytes else ("worker" if worker_bytes > server_bytes else "both")
    print(f"| {S:>7} | {'on' if rep else ('-' if S == 1 else 'off'):>4} | {r['steps_per_s']:>8.2f} "
          f"| {r['worker_steps_per_s_min']:>10.2f} | {r['mb_per_s']:>7.1f} "
          f"| {r['steps_per_s'] / ref['steps_per_s']:>7.2f} | {bound:>7.2f} | {r['steps_per_s'] / bound:>8.2f} "
          f"| {which:>12} |")
EOF
