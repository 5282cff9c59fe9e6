#!/usr/bin/env bash
# Installs a built gyre into a temporary prefix and uses it the way a user's project would:
#   1. examples/ configured on its own with find_package(gyre) against the prefix, built, and
#      gyre_example_allreduce and gyre_example_rt_tasks run under the installed `gyre run -np 2`,
#      gyre_example_rl_cartpole (gyre::rl) alone;
#   2. the same program compiled by hand with `pkg-config --cflags --libs gyre` and run likewise;
#   3. when the build made the Python package, `import gyre` from the prefix under `gyre run -np 2`.
# Usage: scripts/check-install.sh BUILD_DIR. Exits non-zero, saying which step failed, on any
# failure; removes the prefix when done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:?usage: scripts/check-install.sh BUILD_DIR}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/gyre-install-XXXXXX")
trap 'rm -rf "$prefix"' EXIT

step() { printf '\n--- check-install: %s\n' "$*"; }

step "cmake --install $BUILD --prefix $prefix"
cmake --install "$BUILD" --prefix "$prefix" >/dev/null
for f in bin/gyre include/gyre/gyre.h lib/cmake/gyre/gyreConfig.cmake lib/pkgconfig/gyre.pc; do
  [ -e "$prefix/$f" ] || { echo "check-install: $prefix/$f was not installed" >&2; exit 1; }
done

step "examples/ against the prefix with find_package(gyre)"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$ROOT/examples" -B "$prefix/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >/dev/null
cmake --build "$prefix/consumer" -j "${GYRE_JOBS:-$(nproc)}"
ls "$prefix/consumer"/gyre_example_*

step "the installed gyre run -np 2 -- gyre_example_allreduce (find_package build)"
"$prefix/bin/gyre" run -np 2 --timeout 120 -- "$prefix/consumer/gyre_example_allreduce"

step "the installed gyre run -np 2 -- gyre_example_rt_tasks (gyre::rt, find_package build)"
"$prefix/bin/gyre" run -np 2 --timeout 120 -- "$prefix/consumer/gyre_example_rt_tasks"

step "gyre_example_rl_cartpole (gyre::rl, find_package build)"
"$prefix/consumer/gyre_example_rl_cartpole"

step "g++ \$(pkg-config --cflags --libs gyre) examples/allreduce.cc"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046  # pkg-config's words are separate arguments
g++ -O2 "$ROOT/examples/allreduce.cc" -o "$prefix/allreduce-pc" $(pkg-config --cflags --libs gyre)
"$prefix/bin/gyre" run -np 2 --timeout 120 -- "$prefix/allreduce-pc"

if compgen -G "$BUILD/python/gyre/_C*.so" >/dev/null; then
  step "import gyre from the prefix, under the installed gyre run -np 2"
  site=$(compgen -G "$prefix/lib/python3*/dist-packages" | head -1)
  [ -n "$site" ] || { echo "check-install: the Python package was not installed under $prefix/lib" >&2; exit 1; }
  PYTHONPATH="$site" "$prefix/bin/gyre" run -np 2 --timeout 120 -- /usr/bin/python3 -c \
    'import gyre, torch; gyre.init(); assert gyre.allreduce(torch.ones(2), op=gyre.Sum).tolist() == [2.0, 2.0]; print("import gyre from", gyre.__file__)'
fi

echo "check-install: ok"
