#!/usr/bin/env bash
# gyre report's target (docs/report.md, "Measured"): the page of runs at 1, 2 and 4 workers renders
# in Chromium in under 2 s with every plot present. Trains the mlp for EPOCHS (default 2) at each
# size with gyre train, runs gyre report over the three runs, then opens the page REPEATS times
# (default 5) in headless Chromium (tests/browser/chromium.sh) and prints, for each time, the
# figures the page counted as drawn and its own render time (navigation start to every figure
# rasterized, the page's self-check), and the whole browser's wall time. With --screenshots DIR, also
# writes the page's top as DIR/report-page.png and copies three figures' PNGs there (the docs').
# Usage: scripts/report-bench.sh [OUT_DIR] [--screenshots DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-runs/report-bench-$(date +%Y%m%d-%H%M%S)}
shots=""
if [ "${2:-}" = "--screenshots" ]; then shots=${3:?--screenshots needs a directory}; fi
gyre=${GYRE:-$here/../build/bin/gyre}
epochs=${EPOCHS:-2}
repeats=${REPEATS:-5}
mkdir -p "$out"
for np in 1 2 4; do
  "$gyre" train --model mlp --np "$np" --epochs "$epochs" --run-dir "$out/mlp-np$np" --progress off \
    > "$out/train-np$np.log" 2>&1 || { echo "report-bench: training at $np failed; see $out/train-np$np.log" >&2; exit 1; }
  echo "trained np $np: $(grep '^epoch' "$out/train-np$np.log" | tail -1)"
done
"$gyre" report "$out/mlp-np1" "$out/mlp-np2" "$out/mlp-np4" -o "$out/report.html" --title "gyre report: the mlp at 1, 2 and 4 workers"
for i in $(seq "$repeats"); do
  start=$(date +%s%N)
  "$here/../tests/browser/chromium.sh" dom "$out/report.html" > "$out/dom.html" 2> "$out/chromium.log"
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  tag=$(grep -o '<html[^>]*>' "$out/dom.html" || echo "(no <html> tag: see $out/dom.html)")
  console=$(grep -c CONSOLE "$out/chromium.log" || true)
  echo "open $i: $(echo "$tag" | grep -o 'data-[a-z-]*="[^"]*"' | tr '\n' ' ')console messages $console, chromium wall ${wall} ms"
done
if [ -n "$shots" ]; then
  mkdir -p "$shots"
  "$here/../tests/browser/chromium.sh" screenshot "$out/report.html" "$shots/report-page.png" 1200 1000 2>/dev/null
  for id in speedup step-split ranks-mlp-np4; do cp "$out/report-$id.png" "$shots/report-$id.png"; done
  echo "screenshots in $shots"
fi
