#!/usr/bin/env bash
# Allreduce algorithms across network-namespace hosts against the bandwidth bound.
#
#   allreduce_bound.sh [--hosts N] [--ranks-per-host K] [--min-bytes 64K] [--max-bytes 64M]
#                      [--iters I] [--gyre PATH] [--rate RATE] [--timeout S]
#
# Creates N hosts (tests/netns/netns.sh, default 3, K ranks each, default 1), measures the link
# with `netns.sh check`, runs
#   gyre run -H P1:K,...,PN:K --rsh-agent netns-rsh --network-interface gy0 --no-tag-output --
#       gyre bench collectives --algo all --json --min-bytes ... --max-bytes ...
# and prints, per size, each algorithm's time beside the bound among hosts 2(N-1)/N * n / B,
# with B the link rate in bytes/s (1gbit: 125 MB/s), and the ratio time / bound; with K > 1
# also each algorithm's bus bandwidth (n / time * 2(p-1)/p, p = N*K) and the hierarchical
# allreduce's against the flat ring's. Removes the hosts on exit,
# however it exits; the whole run is bounded by --timeout (default 1500 s). Root only; exit 77
# where namespaces cannot be created. Not a test: the numbers depend on the machine's load.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hosts=3 perhost=1 min=64K max=64M iters=0 rate=1gbit timeout=1500
gyre=$(cd "$here/../.." && pwd)/build/bin/gyre
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) perhost=$2; shift 2 ;;
    --min-bytes) min=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --gyre) gyre=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) sed -n '4,5p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2; exit 2 ;;
  esac
done
[ -x "$gyre" ] || { echo "allreduce_bound.sh: no gyre executable at $gyre (use --gyre)" >&2; exit 2; }

prefix="gym$$"
out=$(mktemp -d)
cleanup() {
  "$here/netns.sh" down "$prefix" "$hosts" || true
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

"$here/netns.sh" up "$prefix" "$hosts" --rate "$rate" --owner $$ >"$out/info"
link=$("$here/netns.sh" check "$prefix")

hostlist=""
for ((k = 1; k <= hosts; k++)); do hostlist+="${hostlist:+,}$prefix$k:$perhost"; done
cmd=("$gyre" run -H "$hostlist" --rsh-agent "$here/netns-rsh" --network-interface gy0 --no-tag-output
  --timeout "$timeout"
  -- "$gyre" bench collectives --algo all --json --min-bytes "$min" --max-bytes "$max" --iters "$iters"
  --timeout "$timeout")
echo "# ${cmd[*]}"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
timeout "$((timeout + 60))" "${cmd[@]}" >"$out/rows.jsonl"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$out/rows.jsonl" "$rate" "$link" "$(cat "$out/info")" "$hosts" <<'EOF'
import json, re, sys
rows_file, rate, link, info, hosts = sys.argv[1:6]
H = int(hosts)
m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)(bit|bps)", rate.lower())
if not m:
    sys.exit(f"cannot read the rate '{rate}'")
scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
B = float(m.group(1)) * scale / (8 if m.group(3) == "bit" else 1)  # bytes/s
rows = [json.loads(line) for line in open(rows_file) if line.startswith("{")]
if not rows:
    sys.exit("no result rows in the output of gyre run:\n" + open(rows_file).read())
p = rows[0]["np"]
algos = [a for a in ["naive", "ring", "halving-doubling", "tree", "hierarchical", "auto"]
         if any(r["algo"] == a for r in rows)]
print(f"# {info.splitlines()[0]}, delay {dict(l.split('=', 1) for l in info.splitlines()).get('DELAY')}; "
      f"link check: {link}")
print(f"# p = {p} on {H} hosts, B = {B / 1e6:.1f} MB/s; bound = 2(H-1)/H * n / B (bytes each host must send "
      f"to the others); each cell: time_us (time / bound)")
print(f"| {'bytes':>9} | {'bound_us':>9} | " + " | ".join(f"{a:>20}" for a in algos) + " |")
print(f"|{'-' * 11}|{'-' * 11}|" + "|".join("-" * 22 for _ in algos) + "|")
def time_of(n, a):
    return next((r["time_us"] for r in rows if r["bytes"] == n and r["algo"] == a), None)
for n in sorted({r["bytes"] for r in rows}):
    bound = 2 * (H - 1) / H * n / B * 1e6
    cells = []
    for a in algos:
        t = time_of(n, a)
        cells.append(f"{t:>10.0f} ({t / bound:5.2f}x)" if t else f"{'-':>20}")
    print(f"| {n:>9} | {bound:>9.0f} | " + " | ".join(f"{c:>20}" for c in cells) + " |")
if p > H and "hierarchical" in algos and "ring" in algos:
    print(f"# bus bandwidth, MB/s (n / time * 2(p-1)/p); hierarchical / ring; hierarchical / the bound's")
    print(f"| {'bytes':>9} | {'ring':>8} | {'hierarchical':>12} | {'hier/ring':>9} | {'of bound':>8} |")
    print(f"|{'-' * 11}|{'-' * 10}|{'-' * 14}|{'-' * 11}|{'-' * 10}|")
    for n in sorted({r["bytes"] for r in rows}):
        ring, hier = time_of(n, "ring"), time_of(n, "hierarchical")
        if not ring or not hier:
            continue
        bus = lambda t: n / (t * 1e-6) * 2 * (p - 1) / p / 1e6
        bound = 2 * (H - 1) / H * n / B * 1e6
        print(f"| {n:>9} | {bus(ring):>8.1f} | {bus(hier):>12.1f} | {ring / hier:>8.2f}x | {bound / hier:>7.0%} |")
EOF
