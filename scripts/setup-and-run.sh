#!/usr/bin/env bash
# The main job: installs the dependencies, builds gyre (Release, ccache) and runs the collectives
# benchmark on 2 local ranks with every allreduce algorithm beside OpenMPI's own MPI_Allreduce.
# Extra arguments go to the benchmark (e.g. --np 4, --json).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

export CCACHE_DIR="${CCACHE_DIR:-$PWD/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "${GYRE_JOBS:-$(nproc)}" --target gyre gyre_mpi_bench

exec build/bin/gyre bench collectives --np 2 --algo all --baseline mpi "$@"
