#!/usr/bin/env bash
# Gradient compression (and allreduce algorithms) on shaped links: `gyre bench comm` on network-
# namespace hosts (tests/netns/netns.sh, links shaped to --rate), and with --loopback the same
# runs on this host's loopback and shared memory too, for one table per network.
#
#   scripts/compression-bench.sh [--rate 1gbit] [--model cnn] [--hosts 2] [--ranks-per-host 1]
#       [--epochs 1] [--batch 128] [--lr-schedule constant] [--target 0.85] [--eval-every 20]
#       [--max-steps 0] [--compressions none,fp16,bf16,topk:0.01,powersgd:4] [--algorithms auto]
#       [--loopback] [--build build] [--timeout 1800]
#
# Runs
#   gyre bench comm -H P1:K,...,PN:K --rsh-agent tests/netns/netns-rsh --network-interface gy0
#       --threads 1 --compressions ... --algorithms ... (and the rest of the flags)
# which trains the model (cnn or mlp) once per compression and algorithm and prints bytes per
# step, samples/s, time to the target test accuracy with its speedup over the first row, and the
# final accuracy.
# `--hosts 2 --ranks-per-host 2 --algorithms auto,ring --compressions none` compares the
# hierarchical allreduce (auto's choice there) with the flat ring. Root only (exit 77 where
# namespaces cannot be created). A benchmark, not a test: docs/training.md quotes a run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rate=1gbit model=cnn schedule=constant hosts=2 perhost=1 epochs=1 batch=128 target=0.85 every=20 steps=0
build=build timeout=1800
compressions="none,fp16,bf16,topk:0.01,powersgd:4" algorithms=auto loopback=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --lr-schedule) schedule=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) perhost=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --max-steps) steps=$2; shift 2 ;;
    --compressions) compressions=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    --loopback) loopback=1; shift ;;
    --build) build=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) sed -n '6,9p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2; exit 2 ;;
  esac
done
gyre=$root/$build/bin/gyre
[ -x "$gyre" ] || { echo "compression-bench.sh: build $build first (no $gyre)" >&2; exit 2; }

netns=$root/tests/netns
prefix="gyc$$"
cleanup() { "$netns/netns.sh" down "$prefix" "$hosts" || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

"$netns/netns.sh" up "$prefix" "$hosts" --rate "$rate" --owner $$ >/dev/null
link=$("$netns/netns.sh" check "$prefix")
hostlist=""
for ((k = 1; k <= hosts; k++)); do hostlist+="${hostlist:+,}$prefix$k:$perhost"; done
common=(bench comm --model "$model" --lr-schedule "$schedule" --compressions "$compressions"
  --algorithms "$algorithms" --epochs "$epochs" --batch "$batch" --target "$target" --eval-every "$every"
  --max-steps "$steps" --threads 1 --run-timeout "$timeout")
echo "# $hosts hosts x $perhost workers, links $rate: $link"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
"$gyre" "${common[@]}" -H "$hostlist" --np "$((hosts * perhost))" --rsh-agent "$netns/netns-rsh" \
  --network-interface gy0 || rc=$?
if [ "$loopback" = 1 ]; then
  echo "# the same on this host: $((hosts * perhost)) workers, loopback and shared memory"
  "$gyre" "${common[@]}" --np "$((hosts * perhost))" || rc=$?
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
