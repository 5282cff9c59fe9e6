#!/usr/bin/env bash
# Installs the dependencies, builds gyre and runs every test:
#   1. Release build (warnings are errors when CI=true): the whole ctest suite (libtorch tests
#      included), short `gyre bench collectives --check`, `gyre bench train` and `gyre bench ps` runs, so the
#      benchmarks never rot, the convergence check (scripts/check-convergence.sh) and a few seeds
#      of the fault-injection harness in restart and elastic mode (scripts/fault-injection.py,
#      docs/fault-tolerance.md, docs/elastic.md).
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build of the communication core (without
#      libtorch, which is not built with the sanitizers): the whole suite but the jobs under
#      mpirun (label mpi: OpenMPI's own allocations make LeakSanitizer fail every rank), and one
#      bench run.
#   3. ThreadSanitizer build: the threaded tests (ctest -L threads), without libtorch.
# Sanitizer runs set GYRE_TEST_QUICK=1, which tests use to shrink their largest sizes.
# Ends with "N passed, N failed" over every run and exits non-zero if anything failed.
#
# Environment: GYRE_JOBS (build parallelism, default nproc), GYRE_TEST_STAGES (default
# "release asan tsan"), GYRE_BUILD_DIR (default build; the sanitizer builds go to
# ${GYRE_BUILD_DIR}-asan and -tsan), CCACHE_DIR (default .cache/ccache in the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

scripts/install-deps.sh

export CCACHE_DIR="${CCACHE_DIR:-$ROOT/.cache/ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
JOBS="${GYRE_JOBS:-$(nproc)}"
STAGES="${GYRE_TEST_STAGES:-release asan tsan}"
B="${GYRE_BUILD_DIR:-build}"
WERROR=OFF
if [ "${CI:-}" = "true" ]; then WERROR=ON; fi

passed=0
failed=0
CTEST_PREFIX=""  # a command that ctest runs under (setarch for ThreadSanitizer)
summary=()
start_all=$SECONDS

note() { printf '\n=== %s\n' "$*"; }

# record NAME PASSED FAILED
record() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  summary+=("$(printf '%-34s %4d passed, %4d failed' "$1" "$2" "$3")")
}

# build DIR CMAKE_ARGS...: configure and build; records a failure and returns 1 if either fails.
build() {
  local dir=$1
  shift
  note "build $dir ($*)"
  local t0=$SECONDS
  if cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_WERROR="$WERROR" "$@" &&
    cmake --build "$dir" -j "$JOBS"; then
    echo "built $dir in $((SECONDS - t0)) s"
    return 0
  fi
  record "build $dir" 0 1
  return 1
}

# run_ctest NAME DIR CTEST_ARGS...: runs ctest and adds its counts from the summary line.
run_ctest() {
  local name=$1 dir=$2
  shift 2
  note "ctest $name"
  local log="$dir/ctest-$name.log" t0=$SECONDS rc=0
  (cd "$dir" && $CTEST_PREFIX ctest --output-on-failure -j2 "$@") 2>&1 | tee "$log" || rc=$?
  local line total fails
  line=$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [ -z "$line" ]; then
    echo "ctest $name: no summary line (exit code $rc); counted as one failure"
    record "ctest $name" 0 1
    return
  fi
  fails=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  if [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then fails=1; fi
  record "ctest $name" $((total - fails)) "$fails"
  echo "ctest $name took $((SECONDS - t0)) s"
}

# run_cmd NAME COMMAND...: one check that passes when the command exits 0.
run_cmd() {
  local name=$1
  shift
  note "$name: $*"
  if timeout 600 "$@"; then record "$name" 1 0; else record "$name" 0 1; fi
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
    fi
  fi
}

for stage in $STAGES; do
  case $stage in
    release)
      if build "$B"; then
        run_ctest release "$B"
        bench_smoke "$B" release
        run_cmd "convergence 1 vs 2 workers" scripts/check-convergence.sh "$B"
        run_cmd "fault injection (restarts)" scripts/fault-injection.py --build "$B" --model mlp --np 2 \
          --epochs 2 --max-steps 40 --batch 64 --threads 1 --checkpoint-every 10 --seeds 1-4 --timeout 300
        # Elastic: the survivors go on without the lost worker (3 seeds, about 20 s); then one seed
        # with a replacement, long enough (2 whole mlp epochs, about 25 s) for it to join.
        run_cmd "fault injection (elastic)" scripts/fault-injection.py --build "$B" --job elastic --model mlp \
          --np 2 --epochs 2 --max-steps 40 --batch 64 --threads 1 --commit-every 10 --seeds 1-3 --timeout 300
        run_cmd "fault injection (elastic, replace)" scripts/fault-injection.py --build "$B" --job elastic \
          --replace --model mlp --np 2 --epochs 2 --threads 1 --commit-every 10 --seeds 1 --timeout 300
      fi
      ;;
    asan)
      if build "$B-asan" -DGYRE_SANITIZE=address,undefined -DGYRE_WITH_TORCH=OFF; then
        ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}" \
          UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" GYRE_TEST_QUICK=1 \
          run_ctest asan "$B-asan" -LE mpi  # OpenMPI's allocations at exit fail LeakSanitizer
        GYRE_TEST_QUICK=1 bench_smoke "$B-asan" asan
      fi
      ;;
    tsan)
      if build "$B-tsan" -DGYRE_SANITIZE=thread -DGYRE_BUILD_APPS=OFF -DGYRE_WITH_TORCH=OFF; then
        # ThreadSanitizer needs the address layout it expects; setarch -R turns off ASLR for it.
        if command -v setarch >/dev/null; then CTEST_PREFIX="setarch $(uname -m) -R"; fi
        TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1}" GYRE_TEST_QUICK=1 \
          run_ctest tsan "$B-tsan" -L threads
        CTEST_PREFIX=""
      fi
      ;;
    *) echo "run-tests: unknown stage '$stage' (release, asan, tsan)" >&2; record "stage $stage" 0 1 ;;
  esac
done

note "summary ($((SECONDS - start_all)) s)"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
