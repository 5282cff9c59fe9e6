#!/usr/bin/env bash
# Installs the Debian packages gyre needs. Idempotent: packages already present are skipped, and
# apt-get update runs only when something is missing.
#   scripts/install-deps.sh          everything: the build, every test and benchmark (run-tests.sh)
#   scripts/install-deps.sh --main   only what the main job needs (setup-and-run.sh): the compiler,
#                                    the libraries the tool links, libtorch and the data set
set -euo pipefail

# What the gyre tool and the trainer build and run with.
main_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev  # configured with the tool (tests/, bench/)
  libssl-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libtomlplusplus-dev  # gyre tune's search-space files
  libmsgpack-cxx-dev   # gyre::rt's values on the wire (MessagePack)
  libcpp-httplib-dev   # the Prometheus endpoint (--metrics-port) and the etcd store
  libtorch-dev libopenblas0-pthread dataset-fashion-mnist  # training on libtorch, the data set
  libpng-dev libjpeg62-turbo-dev  # gyre::data's image folders (PNG, JPEG)
)
# What the tests add: the sanitizer builds, MPI, the real daemons and browser, the Python package.
test_packages=(
  clang git
  libclang-rt-14-dev  # the sanitizers' runtimes for clang
  libopenmpi-dev openmpi-bin
  iproute2 procps
  etcd-server   # the tests that run the etcd store and rendezvous against a real cluster
  prometheus    # the test that has a real Prometheus scrape it
  librsvg2-bin  # gyre report's PNGs (rsvg-convert)
  chromium      # the test that opens gyre report's page in a real browser
  python3-torch pybind11-dev python3-dev python3-pytest  # the Python package (import gyre), its tests
  python3-torchvision  # gyre bench data's baseline: DataLoader(ImageFolder(...))
  python3-cloudpickle  # gyre.rt sends functions and classes by value (pickle otherwise)
)

case "${1:-}" in
  --main) packages=("${main_packages[@]}") ;;
  "") packages=("${main_packages[@]}" "${test_packages[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (--main, or nothing for everything)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
