# Sourced by the test scripts that start a real program from Debian (tests/slurm/cluster.sh,
# tests/prometheus/prometheus.sh, tests/browser/chromium.sh):
#
#   ensure_packages "what for" COMMAND... -- PACKAGE...
#
# When a COMMAND is missing, installs the PACKAGEs with apt-get (as root, or through sudo without a
# password), running apt-get update only if a first try fails. When they still cannot be
# installed, prints why and exits 77, which the C++ tests report as a skip with that reason.
# Tests run in parallel (ctest -j2) may install at once: the installs take turns on a lock file
# and apt waits for dpkg's own lock, so one install does not make the other's test skip. Both
# waits are bounded (3 and 2 minutes), and apt runs without the lock file's descriptor: a daemon
# a package's postinst starts would otherwise hold the lock for as long as it lives.
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
  local apt=(apt-get -o DPkg::Lock::Timeout=120)
  if ! (export DEBIAN_FRONTEND=noninteractive
        exec 9>"${TMPDIR:-/tmp}/gyre-ensure-packages.lock"
        command -v flock >/dev/null && flock -w 180 9
        $sudo "${apt[@]}" install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 9>&- ||
        { $sudo "${apt[@]}" update -qq >/dev/null 2>&1 9>&- &&
          $sudo "${apt[@]}" install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 9>&-; }); then
    echo "$what is not installed and apt-get cannot install $*" >&2
    exit 77
  fi
}
