#!/usr/bin/env bash
# Headless Chromium (Debian's package) for the tests that open a page in a real browser:
#
#   tests/browser/chromium.sh dom FILE.html           # the DOM after the page's load handlers ran
#   tests/browser/chromium.sh screenshot FILE.html OUT.png WIDTH HEIGHT
#
# The browser's own log goes to stderr, the page's console messages among it (lines with
# "CONSOLE"). Each call gets a fresh profile, removed afterwards, and the flags this machine's
# closed network needs (no background connections). Installs chromium when missing; exits 77
# when it is missing and cannot be installed (the caller skips, saying why).
set -euo pipefail
action=${1:?usage: chromium.sh dom FILE | screenshot FILE OUT WIDTH HEIGHT}
file=${2:?usage: chromium.sh dom FILE | screenshot FILE OUT WIDTH HEIGHT}

source "$(dirname "$0")/../support/ensure-packages.sh"
ensure_packages "chromium.sh: chromium" chromium -- chromium

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --disable-extensions --user-data-dir="$profile"
       --enable-logging=stderr --v=0 --hide-scrollbars)
url="file://$(realpath "$file")"
# Not exec: the trap removes the profile when Chromium is done.
case "$action" in
  dom) chromium "${flags[@]}" --virtual-time-budget=10000 --dump-dom "$url" ;;
  screenshot) chromium "${flags[@]}" --window-size="${4:?WIDTH}","${5:?HEIGHT}" --screenshot="$3" "$url" ;;
  *) echo "chromium.sh: unknown action $action" >&2; exit 2 ;;
esac
