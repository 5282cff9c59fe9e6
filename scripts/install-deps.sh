#!/usr/bin/env bash
# Installs every Debian package gyre needs, for this and later issues. Idempotent: packages
# already present are skipped, and apt-get update runs only when something is missing.
set -euo pipefail

packages=(
  build-essential clang cmake ninja-build ccache pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libtomlplusplus-dev  # gyre tune's search-space files
  libmsgpack-cxx-dev   # gyre::rt's values on the wire (MessagePack)
  libopenmpi-dev openmpi-bin
  iproute2 procps
  libcpp-httplib-dev  # the Prometheus endpoint (--metrics-port) and the etcd store
  etcd-server   # the tests that run the etcd store and rendezvous against a real cluster
  prometheus    # the test that has a real Prometheus scrape it
  librsvg2-bin  # gyre report's PNGs (rsvg-convert)
  chromium      # the test that opens gyre report's page in a real browser
  # Later issues: training on libtorch with a real BLAS, the data set, the DDP baseline.
  libtorch-dev libopenblas0-pthread dataset-fashion-mnist python3-torch
  pybind11-dev python3-dev python3-pytest  # the Python package (import gyre) and its tests
)

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
