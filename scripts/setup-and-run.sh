#!/usr/bin/env bash
# The main job: installs the dependencies, builds gyre (Release, ccache) and trains the CNN on
# Fashion-MNIST with 2 local workers for 3 epochs (`gyre train`, docs/training.md).
# Arguments, when given, replace those (e.g. --model mlp --np 1 --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

export CCACHE_DIR="${CCACHE_DIR:-$PWD/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${GYRE_JOBS:-$(nproc)}" --target gyre gyre_train_worker

if [ $# -gt 0 ]; then exec build/bin/gyre train "$@"; fi
exec build/bin/gyre train --model cnn --np 2 --epochs 3 --lr-schedule cosine
