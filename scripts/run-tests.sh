#!/usr/bin/env bash
# Installs the dependencies, builds gyre and runs every test. Three stages, each one a build and
# the tests that build finds defects with:
#   1. release: the Release build (GCC; warnings are errors when CI=true): the ctest suite's
#      libtorch, trainer and mpirun tests (labels torch, train, mpi; the whole suite when the asan
#      stage does not run, which runs the rest under the sanitizers), the Python package's pytest
#      tests (tests/python), short `gyre bench collectives --check`, `gyre bench train` and
#      `gyre bench ps` runs, so the benchmarks never rot, the mlp's convergence check
#      (scripts/check-convergence.sh), the install check (scripts/check-install.sh), a few seeds of
#      the fault-injection harness in restart and elastic mode (scripts/fault-injection.py,
#      docs/fault-tolerance.md, docs/elastic.md), and a connection flood held on every port of a
#      starting and training job (scripts/flood-test.py).
#   2. asan: AddressSanitizer + UndefinedBehaviorSanitizer build of the communication core and the
#      tool (without libtorch, which is not built with the sanitizers) with clang, which makes it
#      the thread-safety analysis build too (-Werror=thread-safety: a GYRE_GUARDED_BY member
#      used without its mutex fails it): the whole suite but the jobs under mpirun (label mpi:
#      OpenMPI's own allocations make LeakSanitizer fail every rank), and one bench run.
#   3. tsan: ThreadSanitizer build (of the two test programs it runs): the threaded tests (ctest -L
#      threads) and gyre_torch's in-process tests (-L torch; the trainer's, -L train, are not
#      built there), libtorch's own reports suppressed by tests/tsan-libtorch.supp.
# Sanitizer runs set GYRE_TEST_QUICK=1, which tests use to shrink their largest sizes.
#
# Tiers: `scripts/run-tests.sh` (what CI runs) leaves out the tests listed in tests/full-tier.txt,
# each of which repeats what a cheaper test or stage already proves (the file says which);
# `scripts/run-tests.sh --full` runs them too. Run --full before changing the area a listed test
# covers (docs/testing.md).
#
# Counts: each build and each command (bench, convergence, fault injection) is one check that
# passes or fails; each ctest test passes, fails or is skipped, as ctest's JUnit report
# (BUILD_DIR/ctest-STAGE.xml) says. A skipped test (GTEST_SKIP(): ctest's SKIP_REGULAR_EXPRESSION,
# tests/CMakeLists.txt; or a disabled test) is neither a pass nor a failure: the summary lists each
# with its reason (the GTEST_SKIP() message), and each failed test by name. The summary gives each
# check's counts and duration in seconds, each stage's seconds, then the total time, and the last
# line is "N passed, N failed, N skipped" over every run; exits non-zero if anything failed.
#
# Output: each step's heading gives the seconds since the start; builds and ctest write their
# whole output to BUILD_DIR/build.log and BUILD_DIR/ctest-STAGE.log and show only what failed
# (compiler errors, failed tests with their output) and their counts; each build says how many
# of its compilations the compiler cache served.
# Time budget: GYRE_TIME_BUDGET_S (default 4500 when CI=true, else none), counted from the start.
# When it runs out, the check running then is stopped and fails, named with its stage (a ctest
# stage names the tests it stopped and counts those it did not start as one failure), and the
# checks left do not start (each counted as a failure, "not run: past the time budget"), so the
# summary comes out well before CI's own limit (5400 s) cuts the run off.
# Compiler cache: ccache's own (~/.cache/ccache, or CCACHE_DIR), shared by every checkout of this
# machine, so CI's fresh clone builds from what a developer's build left (CMakeLists.txt).
# Environment: GYRE_JOBS (build parallelism, default nproc), GYRE_TEST_STAGES (default
# "release asan tsan"), GYRE_BUILD_DIR (default build; the others go to
# ${GYRE_BUILD_DIR}-asan and -tsan).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FULL=0
for arg in "$@"; do
  case $arg in
    --full) FULL=1 ;;
    -h | --help)
      echo "usage: scripts/run-tests.sh [--full]  (--full: also the tests of tests/full-tier.txt)"
      exit 0
      ;;
    *)
      echo "run-tests: unknown argument '$arg' (--full)" >&2
      exit 2
      ;;
  esac
done

scripts/install-deps.sh

JOBS="${GYRE_JOBS:-$(nproc)}"
STAGES="${GYRE_TEST_STAGES:-release asan tsan}"
B="${GYRE_BUILD_DIR:-build}"
WERROR=OFF
BUDGET="${GYRE_TIME_BUDGET_S:-}"
if [ "${CI:-}" = "true" ]; then
  WERROR=ON
  BUDGET="${BUDGET:-4500}"
fi

passed=0
failed=0
skipped=0
CTEST_PREFIX=""  # a command that ctest runs under (setarch for ThreadSanitizer)
TARGETS=()       # what build() builds; empty: everything
summary=()
skip_list=()  # "STAGE: TEST: reason", for the summary
fail_list=()  # "STAGE: TEST (why)", or the check's name
stage_list=()  # "STAGE: N s"
STAGE=""      # the stage running now, for the messages of the time budget
start_all=$SECONDS

note() { printf '\n=== [%d s] %s\n' "$((SECONDS - start_all))" "$*"; }

# left: the seconds left of the time budget, counted from this script's start, the package
# installation included (a large number without one).
left() {
  if [ -z "$BUDGET" ]; then echo 1000000; else echo $((BUDGET - SECONDS)); fi
}

# left_at_most N: the seconds left of the budget, or N if fewer: a check's own time limit.
left_at_most() {
  local limit
  limit=$(left)
  if [ "$limit" -gt "$1" ]; then limit=$1; fi
  echo "$limit"
}

# past_budget NAME: true, after counting NAME as a failure that did not run, when the budget is spent.
past_budget() {
  if [ "$(left)" -gt 0 ]; then return 1; fi
  note "$1: not run, past the time budget of $BUDGET s"
  record "$1" 0 1 0 0
  fail_list+=("$STAGE: $1: not run, past the time budget of $BUDGET s (GYRE_TIME_BUDGET_S)")
  return 0
}

# out_of_budget: true when the time budget has run out.
out_of_budget() { [ "$(left)" -le 0 ]; }

# full_tier_excludes STAGE: the ctest regular expression of the tests tests/full-tier.txt lists for
# ctest stage STAGE (release, asan, tsan, tsan-torch), or nothing.
full_tier_excludes() {
  local stage regex rest alternatives=()
  while read -r stage regex rest; do
    [ "$stage" = "$1" ] && alternatives+=("$regex")
  done < <(grep -v -E '^[[:space:]]*(#|$)' tests/full-tier.txt)
  local IFS='|'
  echo "${alternatives[*]}"
}

# cache_stats: "HITS MISSES" of the compiler cache since it was last zeroed; "- -" without ccache.
cache_stats() {
  if ! command -v ccache >/dev/null; then
    echo "- -"
    return
  fi
  ccache --print-stats 2>/dev/null | awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" {h += $2}
    $1 == "cache_miss" {m += $2} END {print h + 0, m + 0}'
}

# record NAME PASSED FAILED SKIPPED SECONDS
record() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  skipped=$((skipped + $4))
  summary+=("$(printf '%-34s %4d passed, %4d failed, %4d skipped %6d s' "$1" "$2" "$3" "$4" "$5")")
}

# build DIR CMAKE_ARGS...: configure and build (the targets in the array TARGETS, or all), one
# check; returns 1 if either fails.
build() {
  local dir=$1
  shift
  past_budget "build $dir" && return 1
  note "build $dir ($*)"
  local t0=$SECONDS log="$dir/build.log" hits misses
  mkdir -p "$dir"
  if command -v ccache >/dev/null; then ccache -z >/dev/null 2>&1 || true; fi
  # The whole output goes to the log; on a failure, its errors and last lines are shown here.
  local rc=0
  { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_WERROR="$WERROR" "$@" &&
    timeout "$(left)" cmake --build "$dir" -j "$JOBS" ${TARGETS[@]:+--target "${TARGETS[@]}"}; } >"$log" 2>&1 || rc=$?
  read -r hits misses <<<"$(cache_stats)"
  if [ "$rc" -eq 0 ]; then
    echo "built $dir in $((SECONDS - t0)) s ($(grep -c -E '^\[[0-9]+/[0-9]+\] ' "$log") steps, $hits compilations from the" \
      "compiler cache and $misses compiled; log: $log)"
    record "build $dir" 1 0 0 $((SECONDS - t0))
    return 0
  fi
  echo "build $dir failed (exit code $rc$([ "$rc" -eq 124 ] && echo ': past the time budget')) after $((SECONDS - t0)) s:"
  grep -E -A4 'error:|FAILED:' "$log" | head -n 150 || true
  tail -n 20 "$log"
  record "build $dir" 0 1 0 $((SECONDS - t0))
  if [ "$rc" -eq 124 ] && out_of_budget; then
    fail_list+=("$STAGE: build $dir: stopped when the time budget of $BUDGET s ran out (GYRE_TIME_BUDGET_S; log: $log)")
  else
    fail_list+=("$STAGE: build $dir (log: $log)")
  fi
  return 1
}

# junit_counts STAGE FILE LOG [OUT_OF_BUDGET]: reads ctest's JUnit report (and ctest's output in LOG, for why a
# test failed: Failed, Timeout, SEGFAULT...). Prints "PASSED FAILED SKIPPED", then one
# line per skipped test ("skip<TAB>STAGE: TEST: reason") and per failed one ("fail<TAB>STAGE: TEST
# (why)"). Skipped: ctest's SKIP_REGULAR_EXPRESSION or SKIP_RETURN_CODE matched, or the test is
# disabled; any other test that did not run (executable missing, fixture failed) failed. The
# reason is GTEST_SKIP()'s message (the lines after "FILE:LINE: Skipped"), else the output's
# last line. With OUT_OF_BUDGET = 1 (the time budget ran out during the run), the tests ctest did
# not start count as one failure that says how many they were, and the ones it stopped are named
# as such. Exits non-zero when the file cannot be read or holds no test.
junit_counts() {
  /usr/bin/python3 - "$1" "$2" "$3" "${4:-0}" <<'PY'  # standard library only
import re, sys
import xml.etree.ElementTree as ET

stage, path, log, out_of_budget = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
cases = list(ET.parse(path).getroot().iter("testcase"))
if not cases:
    sys.exit(f"{path}: no test ran")
try:  # ctest's list after "The following tests FAILED:", as "  7 - Suite.Test (Timeout)"
    with open(log, errors="replace") as f:
        failed_list = f.read().partition("The following tests FAILED:")[2]
    listed = dict(re.findall(r"^\s*\d+ - (.+) \(([^()]+)\)$", failed_list, re.M))
except OSError:
    listed = {}


def reason(out, ctest_message):
    lines = out.splitlines()
    at = max((i for i, l in enumerate(lines) if re.search(r"(^|: )Skipped$", l)), default=None)
    if at is not None:
        text = []
        for l in lines[at + 1:]:
            if l.startswith("[  SKIPPED ]") or (not l.strip() and text):
                break
            if l.strip():
                text.append(l.strip())
        why = " ".join(text) or "(GTEST_SKIP() without a message)"
    else:
        rest = [l.strip() for l in lines if l.strip() and not l.startswith("[")]
        why = rest[-1] if rest else ctest_message or "(no reason given)"
    return why if len(why) <= 200 else why[:197] + "..."


counts = {"pass": 0, "fail": 0, "skip": 0}
notes = []
not_started = 0
for case in cases:
    name, status = case.get("name", "?"), case.get("status", "")
    out = case.findtext("system-out") or ""
    skip = case.find("skipped")
    message = skip.get("message", "") if skip is not None else ""
    if status == "run":
        counts["pass"] += 1
    elif status == "disabled":
        counts["skip"] += 1
        notes.append(f"skip\t{stage}: {name}: disabled")
    elif status == "notrun" and message.startswith("SKIP_"):
        counts["skip"] += 1
        notes.append(f"skip\t{stage}: {name}: {reason(out, message)}")
    elif out_of_budget and status == "notrun":
        not_started += 1
    else:
        failure = case.find("failure")
        why = (failure.get("message") if failure is not None else "") or (
            f"did not run: {message}" if message else listed.get(name, "failed"))
        if out_of_budget and why == "Timeout":
            why = "stopped when the time budget ran out"
        counts["fail"] += 1
        notes.append(f"fail\t{stage}: {name} ({why})")
if not_started:
    counts["fail"] += 1
    notes.append(f"fail\t{stage}: {not_started} tests not started: the time budget ran out (GYRE_TIME_BUDGET_S)")
print(counts["pass"], counts["fail"], counts["skip"])
print("\n".join(notes))
PY
}

# add_notes REPORT: the "skip<TAB>..." and "fail<TAB>..." lines after a report's first line go to
# the summary's lists.
add_notes() {
  local kind text
  while IFS=$'\t' read -r kind text; do
    case $kind in
      skip) skip_list+=("$text") ;;
      fail) fail_list+=("$text") ;;
    esac
  done < <(tail -n +2 <<<"$1")
}

# run_ctest NAME DIR CTEST_ARGS...: runs ctest and adds its passed, failed and skipped tests, read
# from its JUnit report (junit_counts).
run_ctest() {
  local name=$1 dir=$2
  shift 2
  past_budget "ctest $name" && return
  note "ctest $name"
  local log junit t0=$SECONDS rc=0 stop=() exclude=() excluded=""
  log="$dir/ctest-$name.log"
  junit="$(cd "$dir" && pwd)/ctest-$name.xml"
  rm -f "$junit"
  if [ -n "$BUDGET" ]; then stop=(--stop-time "$(date -d "+$(left) seconds" +%H:%M:%S)"); fi
  if [ "$FULL" -eq 0 ]; then excluded=$(full_tier_excludes "$name"); fi
  if [ -n "$excluded" ]; then
    exclude=(-E "$excluded")
    echo "leaving out the --full tier's tests (tests/full-tier.txt): $excluded"
  fi
  # The whole output goes to the log; here, all but the lines of tests that started and passed.
  (cd "$dir" && $CTEST_PREFIX ctest --output-on-failure -j2 --output-junit "$junit" "${stop[@]}" "${exclude[@]}" "$@") \
    >"$log" 2>&1 || rc=$?
  grep -v -E '^ +Start +[0-9]+: |Test +#[0-9]+: .* Passed +[0-9.]+ sec$' "$log" || true
  local report counts kind text pass fails skips
  local budget_out=0
  if out_of_budget; then budget_out=1; fi
  if ! report=$(junit_counts "$name" "$junit" "$log" "$budget_out"); then
    echo "ctest $name: no readable JUnit report (exit code $rc); counted as one failure"
    record "ctest $name" 0 1 0 $((SECONDS - t0))
    fail_list+=("$name: no readable report from ctest (exit code $rc)")
    return
  fi
  counts=$(head -1 <<<"$report")
  read -r pass fails skips <<<"$counts"
  add_notes "$report"
  if [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then
    fails=1
    fail_list+=("$name: ctest exited with code $rc")
  fi
  if [ "$budget_out" -eq 1 ]; then
    echo "ctest $name: the time budget of $BUDGET s ran out during this run (GYRE_TIME_BUDGET_S)"
  fi
  record "ctest $name" "$pass" "$fails" "$skips" $((SECONDS - t0))
  echo "ctest $name took $((SECONDS - t0)) s: $pass passed, $fails failed, $skips skipped"
}

# run_pytest NAME DIR: the Python package's pytest tests (tests/python) against build DIR; each
# pytest test passes, fails or is skipped, as pytest's JUnit report (DIR/pytest.xml) says, a
# skip with its reason.
run_pytest() {
  local name=$1 dir=$2
  past_budget "pytest $name" && return
  note "pytest $name"
  local t0=$SECONDS junit report pass fails skips kind text
  junit="$(cd "$dir" && pwd)/pytest.xml"
  rm -f "$junit"
  local rc=0
  GYRE_BUILD_DIR="$dir" timeout "$(left_at_most 900)" /usr/bin/python3 -m pytest -v -rs --junitxml="$junit" tests/python ||
    rc=$?
  if [ "$rc" -eq 124 ]; then
    if out_of_budget; then
      fail_list+=("$STAGE: pytest $name: stopped when the time budget of $BUDGET s ran out (GYRE_TIME_BUDGET_S)")
    else
      fail_list+=("$STAGE: pytest $name: stopped after its 900 s limit")
    fi
    record "pytest $name" 0 1 0 $((SECONDS - t0))
    return
  fi
  if ! report=$(/usr/bin/python3 - "$name" "$junit" <<'PY'
import sys
import xml.etree.ElementTree as ET

stage, path = sys.argv[1:3]
cases = list(ET.parse(path).getroot().iter("testcase"))
if not cases:
    sys.exit(f"{path}: no test ran")
counts, notes = {"pass": 0, "fail": 0, "skip": 0}, []
for case in cases:
    name = f'{case.get("classname", "")}.{case.get("name", "?")}'
    skip = case.find("skipped")
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is not None:
        counts["fail"] += 1
        notes.append(f"fail\t{stage}: {name} ({(bad.get('message') or 'failed')[:200]})")
    elif skip is not None:
        counts["skip"] += 1
        notes.append(f"skip\t{stage}: {name}: {(skip.get('message') or '(no reason given)')[:200]}")
    else:
        counts["pass"] += 1
print(counts["pass"], counts["fail"], counts["skip"])
print("\n".join(notes))
PY
  ); then
    record "pytest $name" 0 1 0 $((SECONDS - t0))
    fail_list+=("pytest $name: no readable report")
    return
  fi
  read -r pass fails skips <<<"$(head -1 <<<"$report")"
  add_notes "$report"
  record "pytest $name" "$pass" "$fails" "$skips" $((SECONDS - t0))
  echo "pytest $name took $((SECONDS - t0)) s: $pass passed, $fails failed, $skips skipped"
}

# run_cmd NAME COMMAND...: one check that passes when the command exits 0.
run_cmd() {
  local name=$1
  shift
  past_budget "$name" && return
  note "$name: $*"
  local t0=$SECONDS rc=0
  timeout "$(left_at_most 600)" "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    record "$name" 1 0 0 $((SECONDS - t0))
  else
    record "$name" 0 1 0 $((SECONDS - t0))
    if [ "$rc" -eq 124 ] && out_of_budget; then
      fail_list+=("$STAGE: $name: stopped when the time budget of $BUDGET s ran out (GYRE_TIME_BUDGET_S)")
    elif [ "$rc" -eq 124 ]; then
      fail_list+=("$STAGE: $name: stopped after its 600 s limit")
    else
      fail_list+=("$STAGE: $name (exit code $rc)")
    fi
  fi
}

# bench_smoke DIR LABEL: the benchmark on small sizes with result checks.
bench_smoke() {
  local gyre="$1/bin/gyre" label=$2
  run_cmd "bench allreduce ($label)" "$gyre" bench collectives --np 2 --max-bytes 1048576 --check
  run_cmd "bench ps throughput ($label)" "$gyre" bench ps --part throughput --servers 1,2 --floats 64K \
    --steps 20
  if [ "$label" = release ]; then
    for op in broadcast reduce allgather reducescatter alltoall barrier; do
      run_cmd "bench $op np=3 ($label)" "$gyre" bench collectives --np 3 --op "$op" --algo all \
        --max-bytes 65536 --iters 5 --check
    done
    run_cmd "bench --baseline mpi ($label)" "$gyre" bench collectives --np 2 --max-bytes 65536 \
      --iters 5 --baseline mpi
    if [ -x "$1/bin/gyre_train_worker" ]; then
      run_cmd "bench train ($label)" "$gyre" bench train --model mlp,cnn --np 1,2 --steps 12 --skip 2 \
        --threads-grid 1:1
      run_cmd "bench train --shard-optimizer ($label)" "$gyre" bench train --model mlp --np 2 --steps 12 \
        --skip 2 --threads-grid 1:1 --shard-optimizer
      run_cmd "bench ps accuracy ($label)" "$gyre" bench ps --part accuracy --model mlp --modes allreduce,ps:asp \
        --max-steps 30 --eval-every 10 --target 0.5 --straggler-factor 1 --run-timeout 300
      run_cmd "bench comm ($label)" "$gyre" bench comm --model mlp --compressions none,bf16,topk:0.01,powersgd:2 \
        --algorithms auto,ring --max-steps 30 --eval-every 10 --target 0.5 --run-timeout 300
    fi
    if [ -x "$1/bin/gyre_serve_worker" ] && [ -x "$1/bin/gyre_train_worker" ]; then
      run_cmd "bench serve ($label)" "$gyre" bench serve --rates 100,400 --seconds 1
      run_cmd "bench serve --kill-replica ($label)" "$gyre" bench serve --kill-replica 200 --replicas 2 --seconds 2
    fi
    if [ -x "$1/bin/gyre_data_load" ]; then
      run_cmd "bench data ($label)" "$gyre" bench data --limit 500 --threads 1 --json
    fi
    if [ -d "$1/python/gyre/rt" ]; then
      run_cmd "bench rt --python ($label)" "$gyre" bench rt --python --seconds 0.2 --json
    fi
  fi
}

for stage in $STAGES; do
  STAGE=$stage
  stage_t0=$SECONDS
  note "stage $stage"
  case $stage in
    release)
      if build "$B" -DGYRE_WITH_MPI=ON -DGYRE_WITH_PYTHON=ON; then
        # The asan stage runs every test but those of libtorch (not built there) and mpirun (label
        # mpi) under the sanitizers, at the same optimisation; this stage runs those, or the whole
        # suite when that stage does not run.
        if [[ " $STAGES " == *" asan "* ]]; then
          run_ctest release "$B" -L 'torch|train|mpi'
        else
          run_ctest release "$B"
        fi
        run_pytest release "$B"
        bench_smoke "$B" release
        # The mlp's 1 against 2 workers (about 60 s); the cnn's part (about 400 s, 90% in 3 epochs)
        # is the whole script's, a benchmark run by hand.
        run_cmd "convergence 1 vs 2 workers (mlp)" env GYRE_CONVERGENCE_MODELS=mlp GYRE_CONVERGENCE_LAYOUTS= \
          scripts/check-convergence.sh "$B"
        run_cmd "install + find_package(gyre) consumer" scripts/check-install.sh "$B"
        run_cmd "fault injection (restarts)" scripts/fault-injection.py --build "$B" --model mlp --np 2 \
          --epochs 2 --max-steps 40 --batch 64 --threads 1 --checkpoint-every 10 --seeds 1-4 --timeout 300
        # Elastic: the survivors go on without the lost worker (3 seeds, about 20 s); then one seed
        # with a replacement, long enough (2 whole mlp epochs, about 25 s) for it to join.
        run_cmd "fault injection (elastic)" scripts/fault-injection.py --build "$B" --job elastic --model mlp \
          --np 2 --epochs 2 --max-steps 40 --batch 64 --threads 1 --commit-every 10 --seeds 1-3 --timeout 300
        run_cmd "fault injection (elastic, replace)" scripts/fault-injection.py --build "$B" --job elastic \
          --replace --model mlp --np 2 --epochs 2 --threads 1 --commit-every 10 --seeds 1 --timeout 300
        # A worker that stops answering (SIGSTOP) instead of dying, in both kinds of job (about
        # 15 s each): the others time out (GYRE_TIMEOUT_MS=3000) and the job goes on.
        run_cmd "fault injection (restarts, SIGSTOP)" scripts/fault-injection.py --build "$B" --model mlp --np 2 \
          --epochs 2 --max-steps 40 --batch 64 --threads 1 --checkpoint-every 10 --seeds 2 --timeout 300 \
          --mode external --signal stop
        run_cmd "fault injection (elastic, SIGSTOP)" scripts/fault-injection.py --build "$B" --job elastic \
          --model mlp --np 2 --epochs 2 --max-steps 40 --batch 64 --threads 1 --commit-every 10 --seeds 1 \
          --timeout 300 --mode external --signal stop
        # Hundreds of idle, slow and garbage connections on every port the job listens on (the
        # store, the workers' transport listeners, a parameter server), held while it starts and
        # trains: it must finish, the flood refused and logged (about 10 s each).
        run_cmd "connection flood" /usr/bin/python3 scripts/flood-test.py --build "$B"
        run_cmd "connection flood (parameter server)" /usr/bin/python3 scripts/flood-test.py --build "$B" --servers 1
      fi
      ;;
    asan)
      # Built with clang, so this build is also the thread-safety analysis, as errors
      # (GYRE_THREAD_SAFETY: a GYRE_GUARDED_BY member used without its mutex fails it). Without
      # libtorch, which is not built with the sanitizers (and whose 1.13 headers clang rejects in
      # C++20).
      if build "$B-asan" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGYRE_THREAD_SAFETY=ON \
        -DGYRE_SANITIZE=address,undefined -DGYRE_WITH_TORCH=OFF; then
        ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}" \
          UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" GYRE_TEST_QUICK=1 \
          run_ctest asan "$B-asan" -LE mpi  # OpenMPI's allocations at exit fail LeakSanitizer
        GYRE_TEST_QUICK=1 bench_smoke "$B-asan" asan
      fi
      ;;
    tsan)
      # Only the two test programs it runs (not the process tests, which are not run here).
      TARGETS=(gyre_unit_tests gyre_torch_tests)
      tsan_built=0
      build "$B-tsan" -DGYRE_SANITIZE=thread -DGYRE_BUILD_APPS=OFF -DGYRE_WITH_TORCH=ON &&
        tsan_built=1
      TARGETS=()
      if [ "$tsan_built" -eq 1 ]; then
        # ThreadSanitizer needs the address layout it expects; setarch -R turns off ASLR for it.
        if command -v setarch >/dev/null; then CTEST_PREFIX="setarch $(uname -m) -R"; fi
        TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1}" GYRE_TEST_QUICK=1 \
          run_ctest tsan "$B-tsan" -L threads
        # gyre_torch's tests in one process (optimizer, sharded step, checkpoint writer, PS
        # optimizer, data loader; the trainer's tests, label train, need the tool and the
        # worker, which this build (apps off) leaves out). libtorch is not instrumented:
        # tests/tsan-libtorch.supp names the reports it causes, and only those.
        TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1} suppressions=$ROOT/tests/tsan-libtorch.supp" \
          OMP_NUM_THREADS=1 GYRE_TEST_QUICK=1 run_ctest tsan-torch "$B-tsan" -L torch
        CTEST_PREFIX=""
      fi
      ;;
    *) echo "run-tests: unknown stage '$stage' (release, asan, tsan)" >&2; record "stage $stage" 0 1 0 0 ;;
  esac
  stage_list+=("$(printf '%-10s %6d s' "$stage" $((SECONDS - stage_t0)))")
  echo "stage $stage took $((SECONDS - stage_t0)) s"
done

note "summary"
printf '%s\n' "${summary[@]}"
echo "stages:"
printf '  %s\n' "${stage_list[@]}"
if [ "${#skip_list[@]}" -gt 0 ]; then
  echo "skipped (${#skip_list[@]}):"
  printf '  %s\n' "${skip_list[@]}"
fi
if [ "${#fail_list[@]}" -gt 0 ]; then
  echo "failed (${#fail_list[@]}):"
  printf '  %s\n' "${fail_list[@]}"
fi
echo "total time $((SECONDS - start_all)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
