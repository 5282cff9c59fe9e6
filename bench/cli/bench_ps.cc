#include "bench_ps.h"

#include <fmt/format.h>

#include <memory>
#include <string>

#include "bench_child.h"
#include "bench_lists.h"
#include "bench_machine.h"
#include "bench_ps_accuracy.h"
#include "bench_ps_launched.h"
#include "bench_ps_plan.h"
#include "bench_ps_report.h"
#include "bench_ps_throughput.h"
#include "bench_trainer.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

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
    checkLaunchedPart(part);
    checkLaunchedFlags(f, launchedServerCount());
    return runLaunchedThroughputPart(f, thisMachine());
  }
  if (runsAccuracy(part)) {
    f.accuracy.modes = parseTrainModes(f.modes);
    validate(f.accuracy);
    requireTrainWorker("gyre bench ps's time-to-accuracy part", ", or pass --part throughput");
    requireNoLauncher("gyre bench ps");
  }
  const PsMachine m = thisMachine();
  fmt::print(stderr, "{}", busyWarning(m));
  // Part 1 runs in this process: Ctrl-C ends it the ordinary way. Part 2 has children to stop.
  if (runsThroughput(part))
    if (const int code = runThroughputPart(f, m); code != 0) return code;
  if (!runsAccuracy(part)) return 0;
  launcher::installInterruptHandlers();
  try {
    return runAccuracyPart(f, m);
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

  // Each part's options under its own heading; most show their defaults.
  const std::string one = "Part 1: throughput versus servers", two = "Part 2: time to accuracy";
  auto inOne = [&](CLI::Option* o) { return o->capture_default_str()->group(one); };
  auto inTwo = [&](CLI::Option* o) { return o->capture_default_str()->group(two); };
  ThroughputSettings& t = f->throughput;
  CLI::Option* servers = inOne(cmd->add_option(
      "--servers", f->servers,
      "Numbers of servers to measure, comma-separated (under gyre run --servers: the job's)"));
  CLI::Option* workers =
      inOne(cmd->add_option("--workers", t.workers, "Worker threads (under gyre run: the job's ranks)"));
  cmd->add_flag("--no-replication", f->noReplication,
                "No backups of the servers' slices (ps::TableSpec::replicate false): no replication traffic")
      ->group(one);
  inOne(cmd->add_option("--floats", f->floats, "Model size in float32 parameters (K = 2^10, M = 2^20)"));
  inOne(cmd->add_option("--mode", t.mode, "Consistency: bsp, asp or ssp:S"));
  inOne(cmd->add_option("--seconds", t.seconds, "Timed seconds per number of servers"));
  inOne(
      cmd->add_option("--steps", t.steps, "Timed steps per worker instead of --seconds (0: use --seconds)"));
  inOne(cmd->add_option("--warmup", t.warmup, "Untimed steps per worker first"));
  inOne(cmd->add_option("--op-timeout", t.timeoutS, "Seconds any one parameter-server call may block"));

  AccuracySettings& a = f->accuracy;
  for (CLI::Option* o : addAccuracyJobOptions(*cmd, a)) o->group(two);
  inTwo(cmd->add_option("--np", a.np, "Workers of each run"));
  inTwo(cmd->add_option("--modes", f->modes, "allreduce, ps:bsp, ps:asp, ps:ssp:S, comma-separated"));
  inTwo(cmd->add_option("--train-servers", a.servers, "Servers of the ps modes"));
  inTwo(cmd->add_option("--straggler-rank", a.stragglerRank, "The worker slowed in the straggler runs"));
  inTwo(cmd->add_option("--straggler-factor", a.stragglerFactor,
                        "How many times slower it is (1: no straggler runs)"));
  CLI::Option* lr = cmd->add_option("--lr", f->lr, "Learning rate (default: gyre train's)")->group(two);
  CLI::Option* momentum =
      cmd->add_option("--momentum", f->momentum, "Momentum (default: gyre train's)")->group(two);
  for (CLI::Option* o : addRunRootOptions(*cmd, f->runs)) o->group(two);
  cmd->callback([f, lr, momentum, servers, workers, &action] {
    f->serversGiven = servers->count() > 0;
    f->workersGiven = workers->count() > 0;
    if (lr->count() > 0) f->accuracy.lr = f->lr;
    if (momentum->count() > 0) f->accuracy.momentum = f->momentum;
    action = [f] { return runPsBench(*f); };
  });
}

}  // namespace gyre::app
