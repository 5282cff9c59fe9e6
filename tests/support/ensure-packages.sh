# Sourced by the test scripts that start a real program from Debian (tests/slurm/cluster.sh,
# tests/prometheus/prometheus.sh, tests/browser/chromium.sh):
#
#   ensure_packages "what for" COMMAND... -- PACKAGE...
#
# When a COMMAND is missing, installs the PACKAGEs with apt-get (as root, or through sudo without a
# password), running apt-get update only if a first try fails. When they still cannot be
# installed, prints why and exits 77, which the C++ tests report as a skip with that reason.
ensure_packages() {
  local what=$1
  shift
  local missing=0
  while [ "$1" != "--" ]; do
    command -v "$1" >/dev/null 2>&1 || missing=1
    shift
  done
  shift
  [ "$missing" -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
  if ! (export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null 2>&1 &&
          $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; }); then
    echo "$what is not installed and apt-get cannot install $*" >&2
    exit 77
  fi
}
