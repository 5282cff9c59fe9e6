#!/usr/bin/env bash
# A real Prometheus (Debian's package) for the tests, scraping one target every second:
#
#   tests/prometheus/prometheus.sh start DIR TARGET   # TARGET host:port; prints Prometheus's port
#   tests/prometheus/prometheus.sh stop DIR
#
# Returns once Prometheus has scraped TARGET once. Its configuration and storage live in DIR, it listens on a free loopback port in a session of its
# own (it outlives this script, not the test: stop kills it), and nothing of the
# system's own Prometheus (a service the package may have started) is touched. Installs prometheus
# when missing; exits 77 when it is missing and cannot be installed (the caller skips, saying why),
# 1 when it does not become ready (its log is printed).
set -euo pipefail
action=${1:?usage: prometheus.sh start DIR TARGET | stop DIR}
dir=${2:?usage: prometheus.sh start DIR TARGET | stop DIR}

if [ "$action" = stop ]; then
  if [ -s "$dir/prometheus.pid" ]; then
    pid=$(cat "$dir/prometheus.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/prometheus.pid"
  fi
  exit 0
fi
target=${3:?usage: prometheus.sh start DIR TARGET}

source "$(dirname "$0")/../support/ensure-packages.sh"
ensure_packages "prometheus.sh: prometheus" prometheus -- prometheus

mkdir -p "$dir/data"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$dir/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: gyre
    static_configs:
      - targets: ["$target"]
CONF
setsid prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
  --web.listen-address="127.0.0.1:$port" --log.level=warn > "$dir/prometheus.log" 2>&1 &
echo $! > "$dir/prometheus.pid"
# Ready means the target has been scraped once (up is recorded, 0 while nothing serves there):
# Prometheus applies new targets on a 5 s tick, so the first scrape can come seconds after start.
scraped="import json, sys, urllib.request
r = json.load(urllib.request.urlopen('http://127.0.0.1:$port/api/v1/query?query=up', timeout=1))
sys.exit(0 if r['data']['result'] else 1)"
for _ in $(seq 300); do
  if /usr/bin/python3 -c "$scraped" 2>/dev/null; then
    echo "$port"
    exit 0
  fi
  kill -0 "$(cat "$dir/prometheus.pid")" 2>/dev/null || break
  sleep 0.1
done
echo "prometheus.sh: Prometheus on 127.0.0.1:$port did not scrape $target within 30 s" >&2
tail -20 "$dir/prometheus.log" >&2
"$0" stop "$dir"
exit 1
