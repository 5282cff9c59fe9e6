#include "bench_ps.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_lists.h"
#include "bench_ps_launched.h"
#include "bench_ps_plan.h"
#include "bench_ps_report.h"
#include "bench_ps_throughput.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "info/info_system.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct PsBenchFlags {
  std::string part = "all";
  bool json = false;
  // part 1
  ThroughputSettings throughput;
  std::string servers = "1,2,4";
  std::string floats = "4M";
  bool serversGiven = false, workersGiven = false;  // refused against the job's under gyre run --servers
  bool noReplication = false;
  // part 2
  AccuracySettings accuracy;
  std::string modes = "allreduce,ps:bsp,ps:asp,ps:ssp:2";
  double lr = 0, momentum = 0;  // set in `accuracy` only when given: otherwise gyre train's own
  std::string runRoot;
  bool keepRuns = false;
};

PsMachine thisMachine() {
  PsMachine m;
  const info::Cores cores = info::countCores();
  m.usableCores = cores.usable;
  m.onlineCores = cores.online;
  if (double load[1]; getloadavg(load, 1) == 1) m.loadAverage = load[0];
  return m;
}

// ---- part 1 ------------------------------------------------------------------------------------

int runThroughput(const PsBenchFlags& f, const PsMachine& m) {
  const ThroughputSettings& s = f.throughput;
  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  if (!f.json) {
    fmt::print("== parameter-server throughput versus servers\n{}\n{}", throughputSettingsText(s, keys, m),
               throughputHeader(s));
    std::fflush(stdout);
  }
  std::vector<ThroughputPoint> points;
  for (int servers : s.servers) {
    try {
      points.push_back(measureThroughput(s, keys, servers));
    } catch (const std::exception& e) {
      fmt::print(stderr, "gyre bench ps: the throughput point with {} server{} failed: {}\n", servers,
                 servers == 1 ? "" : "s", e.what());
      return 1;
    }
    if (!f.json) {
      const ThroughputPoint* ref = throughputReference(points);
      fmt::print("{}", throughputRow(points.back(), ref ? std::optional(ref->stepsPerS()) : std::nullopt));
      std::fflush(stdout);
    }
  }
  if (f.json)
    fmt::print("{}\n", throughputJson(s, keys, points, m).dump());
  else
    fmt::print(
        "speedup: steps/s against the fewest servers; MB/s: pushed + pulled bytes of all workers; stale: "
        "the servers' staleness per update (mean/p50/p99/max).\n{}",
        throughputSummary(points, m));
  std::fflush(stdout);
  return 0;
}

// Part 1 as a worker of `gyre run --servers S` (bench_ps_launched.h): the job's servers and
// ranks; rank 0 prints the one row.
int runLaunchedThroughput(const PsBenchFlags& f, const PsMachine& m) {
  const ThroughputSettings& s = f.throughput;
  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  LaunchedThroughput r;
  try {
    r = measureLaunchedThroughput(s, keys);
  } catch (const InvalidArgument&) {
    throw;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gyre bench ps: the throughput measurement with the job's servers failed: {}\n",
               e.what());
    return 1;
  }
  if (r.rank != 0) return 0;
  if (f.json) {
    fmt::print("{}\n", launchedThroughputJson(s, keys, r.point, r.minWorkerStepsPerS, m).dump());
  } else {
    fmt::print("== parameter-server throughput with the job's servers\n{}\n{}{}",
               launchedThroughputSettingsText(s, keys, r.point), throughputHeader(s),
               throughputRow(r.point, std::nullopt));
    fmt::print(
        "slowest worker: {:.2f} steps/s of its own. MB/s: pushed + pulled bytes of all workers; stale: the "
        "workers' staleness per update (mean/p50/p99/max).\n",
        r.minWorkerStepsPerS);
  }
  std::fflush(stdout);
  return 0;
}

// Under `gyre run --servers S` the job fixes the servers and the workers: a --servers list or a
// --workers that disagrees is refused rather than silently ignored.
void checkLaunchedFlags(const PsBenchFlags& f, PsBenchPart part) {
  GYRE_USAGE_CHECK(
      part == PsBenchPart::kThroughput,
      "under gyre run --servers (GYRE_PS_SERVERS is set) gyre bench ps measures the throughput with the "
      "job's servers: pass --part throughput (the accuracy part starts its own jobs: run it outside gyre "
      "run)");
  const int jobServers = launchedServerCount();
  if (f.serversGiven) {
    GYRE_USAGE_CHECK(
        f.servers.find(',') == std::string::npos, "--servers '", f.servers,
        "': under gyre run --servers the job has a fixed number of servers (", jobServers,
        "); give one value or none, and run one job per number of servers (tests/netns/ps_bound.sh)");
    GYRE_USAGE_CHECK(f.throughput.servers == std::vector<int>{jobServers}, "--servers ", f.servers,
                     " disagrees with the job's ", jobServers, " servers (gyre run --servers ", jobServers,
                     ")");
  }
  GYRE_USAGE_CHECK(!f.workersGiven,
                   "--workers: under gyre run --servers the workers are the job's ranks (gyre run -np/-H)");
}

// ---- part 2 ------------------------------------------------------------------------------------

AccuracyRow runOne(const AccuracySettings& s, const AccuracyRun& run, const fs::path& dir) {
  AccuracyRow row;
  row.run = run;
  row.runDir = dir.string();
  const ChildRun child = runTrainingJob("gyre train " + run.label(), trainArguments(s, run, dir.string()),
                                        dir, "gyre-train.log", s.runTimeoutS);
  row.wallS = child.wallS;
  if (!child.ok) {
    row.error = child.error;
    return row;
  }
  try {
    std::vector<EvalPoint> points;
    for (const std::string& line : readLines(dir / "eval.jsonl"))
      if (const std::optional<EvalPoint> p = parseEvalLine(line)) points.push_back(*p);
    if (points.empty()) {
      row.error = "the run wrote no evaluations to " + (dir / "eval.jsonl").string() +
                  " (it needs a gyre train with --eval-every)";
      return row;
    }
    row.tta = timeToAccuracy(points, s.target);
    row.samplesPerS = trainingSamplesPerS(row.tta, s.batch);
    row.totals = parseMetricsLines(readLines(dir / "metrics.jsonl"));
  } catch (const Error& e) {
    row.error = e.what();
    return row;
  }
  row.ok = true;
  return row;
}

// What part 2 needs before anything runs. Throws InvalidArgument.
void checkCanTrain() {
  requireTrainWorker("gyre bench ps's time-to-accuracy part", ", or pass --part throughput");
  requireNoLauncher("gyre bench ps");
}

int runAccuracy(const PsBenchFlags& f, const PsMachine& m) {
  const AccuracySettings& s = f.accuracy;
  const RunRoot runRoot(f.runRoot, "gyre bench ps");
  const fs::path& root = runRoot.path();

  const std::vector<AccuracyRun> runs = planAccuracyRuns(s);
  if (!f.json) {
    fmt::print("{}== time to accuracy\n{}\n{}", runsThroughput(parsePsBenchPart(f.part)) ? "\n" : "",
               accuracySettingsText(s, m), accuracyHeader(s));
    std::fflush(stdout);
  }
  std::vector<AccuracyRow> rows;
  bool failed = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fmt::print(stderr, "gyre bench ps: run {} of {}: {}\n", i + 1, runs.size(), runs[i].label());
    rows.push_back(runOne(s, runs[i], root / runs[i].dirName()));
    failed = failed || !rows.back().ok;
    if (!rows.back().ok)
      fmt::print(stderr, "gyre bench ps: {} failed: {}\n", runs[i].label(), rows.back().error);
    if (!f.json) {
      fmt::print("{}", accuracyRow(rows.back()));
      std::fflush(stdout);
    }
  }
  if (f.json) {
    fmt::print("{}\n", accuracyJson(s, rows, m).dump());
  } else {
    fmt::print(
        "to {}: training time (evaluations left out) to the first evaluation at or above it, every {} steps "
        "of "
        "rank 0; samples/s: batch x rank 0's steps / its training time; stale: staleness of the workers' "
        "updates "
        "(mean/p50/p99/max); clock wait: blocked in clock(), summed over workers.\n{}",
        s.target, s.evalEvery, winnerText(s, rows));
  }
  std::fflush(stdout);
  runRoot.done(f.keepRuns, failed);
  return failed ? 1 : 0;
}

int runPsBench(PsBenchFlags f) {
  const PsBenchPart part = parsePsBenchPart(f.part);
  const bool launched = launchedWithServers();
  if (runsThroughput(part)) {
    f.throughput.servers = parseCountList(f.servers, "--servers");
    f.throughput.floats = parseSizeWithSuffix(f.floats, "--floats");
    f.throughput.replicate = !f.noReplication;
    validate(f.throughput);
  }
  if (launched) {
    checkLaunchedFlags(f, part);
    return runLaunchedThroughput(f, thisMachine());
  }
  if (runsAccuracy(part)) {
    f.accuracy.modes = parseTrainModes(f.modes);
    validate(f.accuracy);
    checkCanTrain();
  }
  const PsMachine m = thisMachine();
  if (m.loadAverage > 0.5 * m.usableCores)
    fmt::print(
        stderr,
        "warning: the machine is busy (load average {:.2f} on {} cores): the figures will be low and noisy\n",
        m.loadAverage, m.usableCores);
  // Part 1 runs in this process: Ctrl-C ends it the ordinary way. Part 2 has children to stop.
  if (runsThroughput(part))
    if (const int code = runThroughput(f, m); code != 0) return code;
  if (!runsAccuracy(part)) return 0;
  launcher::installInterruptHandlers();
  try {
    return runAccuracy(f, m);
  } catch (const RunFailed& e) {
    fmt::print(stderr, "gyre bench ps: {}\n", e.what());
    return e.code();
  }
}

}  // namespace

void addBenchPs(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<PsBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "ps", "Parameter server: throughput versus servers, and time to accuracy against allreduce");
  cmd->footer(
      "Part 1 (throughput) starts S servers and --workers worker threads in this process, on loopback, for "
      "each\n"
      "S of --servers; every step pushes and pulls the whole model (--floats, in keys of uneven sizes). It\n"
      "prints steps/s, MB/s, the updates each server applied and the speedup over the fewest servers.\n"
      "Run as the workers of `gyre run --servers S` (GYRE_PS_SERVERS set), part 1 measures that job's\n"
      "servers instead, wherever gyre run placed them (--server-hosts), and rank 0 prints one row\n"
      "(tests/netns/ps_bound.sh runs it over network-namespace hosts with shaped links).\n"
      "Part 2 (accuracy) runs `gyre train` once per mode of --modes, without and with a straggler (rank\n"
      "--straggler-rank slowed --straggler-factor times), one after another, and prints the time to reach\n"
      "--target test accuracy, samples/s and the staleness distribution, then the winner of each.\n"
      "See docs/benchmarks.md, \"gyre bench ps\".\n\n"
      "Examples:\n"
      "  gyre bench ps --part throughput --servers 1,2,4\n"
      "  gyre run -H w1,w2 --servers 2 --server-hosts s1,s2 -- gyre bench ps --part throughput --json\n"
      "  gyre bench ps --part accuracy --model cnn --np 2 --target 0.85\n"
      "  gyre bench ps --part accuracy --max-steps 100 --target 0.7 --eval-every 20 --json   # quick");
  cmd->add_option("--part", f->part, "throughput, accuracy or all")
      ->check(CLI::IsMember({"throughput", "accuracy", "all"}))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "One JSON object per part instead of the tables");

  const std::string one = "Part 1: throughput versus servers";
  ThroughputSettings& t = f->throughput;
  CLI::Option* servers =
      cmd->add_option("--servers", f->servers,
                      "Numbers of servers to measure, comma-separated (under gyre run --servers: the job's)")
          ->capture_default_str()
          ->group(one);
  CLI::Option* workers =
      cmd->add_option("--workers", t.workers, "Worker threads (under gyre run: the job's ranks)")
          ->capture_default_str()
          ->group(one);
  cmd->add_flag("--no-replication", f->noReplication,
                "No backups of the servers' slices (ps::TableSpec::replicate false): no replication traffic")
      ->group(one);
  cmd->add_option("--floats", f->floats, "Model size in float32 parameters (K = 2^10, M = 2^20)")
      ->capture_default_str()
      ->group(one);
  cmd->add_option("--mode", t.mode, "Consistency: bsp, asp or ssp:S")->capture_default_str()->group(one);
  cmd->add_option("--seconds", t.seconds, "Timed seconds per number of servers")
      ->capture_default_str()
      ->group(one);
  cmd->add_option("--steps", t.steps, "Timed steps per worker instead of --seconds (0: use --seconds)")
      ->capture_default_str()
      ->group(one);
  cmd->add_option("--warmup", t.warmup, "Untimed steps per worker first")->capture_default_str()->group(one);
  cmd->add_option("--op-timeout", t.timeoutS, "Seconds any one parameter-server call may block")
      ->capture_default_str()
      ->group(one);

  const std::string two = "Part 2: time to accuracy";
  AccuracySettings& a = f->accuracy;
  cmd->add_option("--model", a.model, "mlp or cnn")->capture_default_str()->group(two);
  cmd->add_option("--np", a.np, "Workers of each run")->capture_default_str()->group(two);
  cmd->add_option("--target", a.target, "Test accuracy to reach")->capture_default_str()->group(two);
  cmd->add_option("--modes", f->modes, "allreduce, ps:bsp, ps:asp, ps:ssp:S, comma-separated")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--train-servers", a.servers, "Servers of the ps modes")->capture_default_str()->group(two);
  cmd->add_option("--straggler-rank", a.stragglerRank, "The worker slowed in the straggler runs")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--straggler-factor", a.stragglerFactor,
                  "How many times slower it is (1: no straggler runs)")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--epochs", a.epochs, "Epochs of each run")->capture_default_str()->group(two);
  cmd->add_option("--max-steps", a.maxSteps, "Steps per epoch (0: the whole epoch)")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--batch", a.batch, "Global batch")->capture_default_str()->group(two);
  cmd->add_option("--eval-every", a.evalEvery, "Test accuracy every N steps")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--run-timeout", a.runTimeoutS,
                  "Seconds a run may take before it is stopped (a failure row)")
      ->capture_default_str()
      ->group(two);
  cmd->add_option("--threads", a.threads, "Compute threads per worker (default: gyre train's)")->group(two);
  CLI::Option* lr = cmd->add_option("--lr", f->lr, "Learning rate (default: gyre train's)")->group(two);
  CLI::Option* momentum =
      cmd->add_option("--momentum", f->momentum, "Momentum (default: gyre train's)")->group(two);
  cmd->add_option("--seed", a.seed, "Seed of every run")->capture_default_str()->group(two);
  cmd->add_option("--data-dir", a.dataDir, "Fashion-MNIST's IDX files (default: gyre train's)")->group(two);
  cmd->add_option("--run-root", f->runRoot, "Where the runs' directories go (default: a temporary directory)")
      ->group(two);
  cmd->add_flag("--keep-runs", f->keepRuns,
                "Keep the temporary run directories (they are kept after a failure)")
      ->group(two);
  cmd->callback([f, lr, momentum, servers, workers, &action] {
    f->serversGiven = servers->count() > 0;
    f->workersGiven = workers->count() > 0;
    if (lr->count() > 0) f->accuracy.lr = f->lr;
    if (momentum->count() > 0) f->accuracy.momentum = f->momentum;
    action = [f] { return runPsBench(*f); };
  });
}

}  // namespace gyre::app
