#!/usr/bin/env bash
# Convergence check of issue 4: trains each model for the same number of epochs with 1 and with 2
# workers (global batch 128, the same learning rate and cosine schedule: gyre train keeps the global batch fixed, so
# no scaling is needed) and checks that
#   - the 2-worker test accuracy is within 0.5 points of the 1-worker one (mlp and cnn);
#   - the CNN reaches at least 90%;
# and, for the model-parallel layouts (issue 18), trains the vit on 4 workers as dp = 4, dp = 2 × pp = 2
# and dp = 2 × tp = 2 (the same global batch and schedule) and checks that each split layout's test
# accuracy is within 0.5 points of dp = 4's.
# Usage: scripts/check-convergence.sh [BUILD_DIR] ; GYRE_CONVERGENCE_EPOCHS (default 3),
# GYRE_CONVERGENCE_MODELS (default "mlp cnn") and GYRE_CONVERGENCE_LAYOUTS (default "pp tp"; empty
# skips the vit) shorten it. Exits non-zero on a miss.
set -euo pipefail
B="${1:-build}"
EPOCHS="${GYRE_CONVERGENCE_EPOCHS:-3}"
MODELS="${GYRE_CONVERGENCE_MODELS:-mlp cnn}"
LAYOUTS="${GYRE_CONVERGENCE_LAYOUTS-pp tp}"
work=$(mktemp -d /tmp/gyre-convergence.XXXXXX)
trap 'rm -rf "$work"' EXIT

# final_accuracy RUN_DIR: the last epoch's test accuracy (a fraction) from metrics.jsonl.
final_accuracy() {
  /usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["test_accuracy"])' \
    "$1/metrics.jsonl"
}

status=0
for model in $MODELS; do
  for np in 1 2; do
    "$B/bin/gyre" train --model "$model" --np "$np" --epochs "$EPOCHS" --batch 128 --lr 0.05 --lr-schedule cosine \
      --progress off --run-dir "$work/$model-$np" >"$work/$model-$np.log" 2>&1 || {
      echo "convergence: gyre train --model $model --np $np failed:"
      tail -20 "$work/$model-$np.log"
      exit 1
    }
  done
  one=$(final_accuracy "$work/$model-1")
  two=$(final_accuracy "$work/$model-2")
  verdict=$(/usr/bin/python3 - "$model" "$one" "$two" <<'PY'
import sys
model, one, two = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ok = abs(one - two) * 100 <= 0.5 and (model != "cnn" or two >= 0.90)
print(("ok" if ok else "MISS") + f": {model} test accuracy 1 worker {one*100:.2f}%, 2 workers {two*100:.2f}% "
      f"(difference {abs(one-two)*100:.2f} points, at most 0.5" + (", cnn needs 90%" if model == "cnn" else "") + ")")
PY
)
  echo "convergence $verdict after $EPOCHS epochs"
  [[ $verdict == ok* ]] || status=1
done

# The vit on 4 workers: dp = 4 against dp = 2 × pp = 2 and dp = 2 × tp = 2.
if [[ -n $LAYOUTS ]]; then
  vit_train() {  # NAME FLAGS...
    local name=$1
    shift
    "$B/bin/gyre" train --model vit --np 4 --epochs "$EPOCHS" --batch 128 --lr 0.05 --lr-schedule cosine \
      --progress off --run-dir "$work/vit-$name" "$@" >"$work/vit-$name.log" 2>&1 || {
      echo "convergence: gyre train --model vit --np 4 $* failed:"
      tail -20 "$work/vit-$name.log"
      exit 1
    }
  }
  vit_train dp4
  base=$(final_accuracy "$work/vit-dp4")
  for layout in $LAYOUTS; do
    case $layout in
      pp) vit_train dp2xpp2 --pp 2 --micro-batches 4 && name=dp2xpp2 ;;
      tp) vit_train dp2xtp2 --tp 2 && name=dp2xtp2 ;;
      *) echo "convergence: unknown layout '$layout' in GYRE_CONVERGENCE_LAYOUTS (pp, tp)"; exit 2 ;;
    esac
    got=$(final_accuracy "$work/vit-$name")
    verdict=$(/usr/bin/python3 - "$name" "$base" "$got" <<'PY'
import sys
name, base, got = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ok = abs(base - got) * 100 <= 0.5
print(("ok" if ok else "MISS") + f": vit test accuracy dp=4 {base*100:.2f}%, {name} {got*100:.2f}% "
      f"(difference {abs(base-got)*100:.2f} points, at most 0.5)")
PY
)
    echo "convergence $verdict after $EPOCHS epochs"
    [[ $verdict == ok* ]] || status=1
  done
fi
exit $status
