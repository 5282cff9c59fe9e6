#!/usr/bin/env bash
# The main job: installs what it needs (scripts/install-deps.sh --main), builds the gyre tool and
# the trainer's worker (Release, unity builds, through ccache) and trains the CNN on Fashion-MNIST
# with 2 local workers for 3 epochs (`gyre train`, docs/training.md). Only those two programs are
# built before training starts; `cmake --build build` builds the rest (tests, benchmarks, Python).
# Arguments, when given, replace those of gyre train (e.g. --model mlp --np 1 --epochs 1).
# The compiler cache is ccache's own (~/.cache/ccache, or CCACHE_DIR), shared by every checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --main

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${GYRE_JOBS:-$(nproc)}" --target gyre gyre_train_worker

if [ $# -gt 0 ]; then exec build/bin/gyre train "$@"; fi
exec build/bin/gyre train --model cnn --np 2 --epochs 3 --lr-schedule cosine
