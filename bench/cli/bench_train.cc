#include "bench_train.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "bench_child.h"
#include "bench_sweep.h"
#include "bench_train_plan.h"
#include "bench_train_report.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "gyre/init.h"
#include "info/info_system.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

struct TrainBenchFlags {
  std::string models = "mlp,cnn";
  std::string np = "1,2";
  int batch = 128;
  int steps = 0;
  int skip = 5;
  int repeat = 1;
  std::string pick = "best";
  bool json = false;
  std::string baseline = "none";
  std::string threadsGrid = "default";
  double lr = 0.05;
  double momentum = 0.9;
  int seed = 0;
  std::string compression = "none";
  bool shardOptimizer = false;
  std::string dataDir;
  std::string worker;  // gyre_train_worker; empty: next to gyre
  std::string python;  // empty: python3 on PATH, then /usr/bin/python3 (Debian's python3-torch)
  double timeoutS = 600;
};

std::string besideGyre(const std::string& name) {
  const std::string self = launcher::selfExecutable();
  return self.substr(0, self.rfind('/') + 1) + name;
}

std::string locateWorker(const TrainBenchFlags& f) {
  if (!f.worker.empty()) {
    const std::string found =
        launcher::findExecutable(f.worker.find('/') == std::string::npos ? "./" + f.worker : f.worker);
    GYRE_USAGE_CHECK(!found.empty(), "--worker ", f.worker, " is not an executable file");
    return found;
  }
  requireTrainWorker("gyre bench train", ", or pass --worker PATH");
  return trainWorkerBesideTool();
}

// The python3 that imports torch with gloo, or "" and `why` says what was tried. A --python that
// does not is a usage error.
std::string findTorchPython(const TrainBenchFlags& f, std::string& why) {
  const std::vector<std::string> candidates =
      f.python.empty() ? std::vector<std::string>{"python3", "/usr/bin/python3"} : std::vector{f.python};
  const std::string probe =
      "import numpy, torch, torch.distributed as d; assert d.is_gloo_available(), 'no gloo'";
  for (const std::string& python : candidates) {
    const std::string path = launcher::findExecutable(python);
    if (path.empty()) {
      why += fmt::format("{}{}: not found", why.empty() ? "" : "; ", python);
      continue;
    }
    info::CommandOptions options;
    options.timeout = std::chrono::seconds(60);
    const info::CommandResult r = info::runCommand({path, "-c", probe}, options);
    if (r.ok()) return path;
    std::string last = r.output.empty() ? r.error : r.output;  // the exception's line
    while (!last.empty() && last.back() == '\n') last.pop_back();
    if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", path, last);
  }
  GYRE_USAGE_CHECK(f.python.empty(), "--python ", f.python, " cannot run the DDP baseline: ", why);
  return "";
}

// The variables that set a process's threads (docs/benchmarks.md, "Threads").
std::vector<std::pair<std::string, std::string>> threadEnvironment(const ThreadPair& t) {
  const std::string blas = std::to_string(t.blas);
  return {{"OPENBLAS_NUM_THREADS", blas},
          {"OMP_NUM_THREADS", blas},
          {"MKL_NUM_THREADS", blas},
          {"GYRE_NUM_THREADS", std::to_string(t.torch)}};
}

class TrainBench {
 public:
  // `python` and `ddpScript` may be empty when no DDP run is planned.
  TrainBench(const TrainBenchFlags& f, std::string worker, std::string python, std::string ddpScript)
      : f_(f), worker_(std::move(worker)), python_(std::move(python)), ddpScript_(std::move(ddpScript)) {}

  // Runs `c` once and returns its figures; throws RunFailed.
  RunFigures runOnce(const TrainConfig& c) {
    launcher::ChildSpec spec;
    spec.name = fmt::format("{} {} (world {})", c.model, c.label(), c.world);
    spec.env = threadEnvironment(c.threads);
    spec.ownProcessGroup = true;  // stopping it stops gyre run's workers or DDP's processes too
    spec.argv = argvFor(c);
    spec.path = spec.argv.front();

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2 failed");
    spec.stdoutFd = fds[1];  // stderr stays ours: the workers' errors show as they happen
    launcher::ProcessGroup group;
    group.spawn(spec);
    close(fds[1]);
    // The JSON epoch lines are kept; the worker's human lines (its epoch summary) are not shown.
    std::vector<RunFigures> epochs;
    const launcher::SuperviseResult result = launcher::supervise(
        group, fds[0], Deadline::after(std::chrono::milliseconds(static_cast<long>(f_.timeoutS * 1000))), "",
        [&](const std::string& line) {
          if (std::optional<RunFigures> e = parseEpochLine(line)) epochs.push_back(*e);
        });
    close(fds[0]);
    if (!result.ok) throw RunFailed(result.error, result.exitCode);
    if (epochs.empty()) throw RunFailed(spec.name + " exited without printing its figures", 1);
    return combineEpochs(epochs);
  }

 private:
  std::vector<std::string> argvFor(const TrainConfig& c) const {
    const EpochSplit split = splitSteps(c.steps, c.globalBatch);
    std::vector<std::string> common = {"--model",     c.model,
                                       "--epochs",    std::to_string(split.epochs),
                                       "--max-steps", std::to_string(split.stepsPerEpoch),
                                       "--batch",     std::to_string(c.globalBatch),
                                       "--lr",        fmt::format("{}", f_.lr),
                                       "--momentum",  fmt::format("{}", f_.momentum),
                                       "--seed",      std::to_string(f_.seed),
                                       "--threads",   std::to_string(c.threads.torch)};
    if (!f_.dataDir.empty()) common.insert(common.end(), {"--data-dir", f_.dataDir});

    std::vector<std::string> argv;
    if (c.runner == TrainRunner::kDdp) {
      argv = {
          python_, ddpScript_, "--world", std::to_string(c.world), "--skip-steps", std::to_string(c.skip)};
      argv.insert(argv.end(), common.begin(), common.end());
      return argv;
    }
    if (c.runner == TrainRunner::kGyre && c.world > 1) {
      argv = {launcher::selfExecutable(), "run",       "--np",
              std::to_string(c.world),    "--threads", std::to_string(c.threads.torch),
              "--no-tag-output",          "--"};
    }
    argv.push_back(worker_);
    if (c.runner == TrainRunner::kPlain) argv.emplace_back("--plain");
    argv.insert(argv.end(), common.begin(), common.end());
    const std::vector<std::string> more = {"--skip-steps", std::to_string(c.skip), "--no-eval",
                                           "--json",       "--progress",           "off"};
    argv.insert(argv.end(), more.begin(), more.end());
    if (c.runner == TrainRunner::kGyre) argv.insert(argv.end(), {"--compression", f_.compression});
    if (c.runner == TrainRunner::kGyre && c.world > 1 && f_.shardOptimizer) argv.push_back("--shard-optimizer");
    return argv;
  }

  const TrainBenchFlags& f_;
  std::string worker_;
  std::string python_;
  std::string ddpScript_;
};

// The result of one configuration from its runs, printed as a table row or a JSON line.
ConfigResult report(const TrainConfig& c, const std::vector<RunFigures>& runs, const TrainReportContext& ctx,
                    bool json) {
  ConfigResult r{c, runs[pickRun(runs, ctx.pick)], {}};
  for (const RunFigures& run : runs) r.runSamplesPerS.push_back(run.samplesPerS);
  if (threadsDiffer(r))
    fmt::print(stderr, "warning: {} {} asked for torch {} blas {} threads; the process reported {} and {}\n",
               c.model, c.label(), c.threads.torch, c.threads.blas, r.figures.torchThreads,
               r.figures.blasThreads);
  fmt::print("{}", json ? configJson(r, ctx).dump() + "\n" : tableRow(r));
  std::fflush(stdout);
  return r;
}

int runTrainBench(const TrainBenchFlags& f) {
  TrainBenchSettings s;
  s.models = parseModelList(f.models);
  s.worlds = parseWorldList(f.np);
  s.globalBatch = f.batch;
  s.steps = f.steps;
  s.skip = f.skip;
  s.plainThreads = parseThreadsGrid(f.threadsGrid);
  s.ddp = f.baseline == "ddp";
  validate(s);
  GYRE_USAGE_CHECK(f.repeat >= 1, "--repeat must be at least 1 (got ", f.repeat, ")");
  GYRE_USAGE_CHECK(f.timeoutS > 0, "--timeout must be positive");
  requireNoLauncher("gyre bench train");
  TrainReportContext ctx;
  ctx.repeat = f.repeat;
  ctx.pick = parsePick(f.pick);
  ctx.lr = f.lr;
  ctx.momentum = f.momentum;
  ctx.compression = f.compression;
  ctx.shardOptimizer = f.shardOptimizer;
  ctx.usableCores = info::countCores().usable;
  if (double load[1]; getloadavg(load, 1) == 1) ctx.loadAverage = load[0];

  const std::string worker = locateWorker(f);
  std::string python, ddpScript, ddpSkip;
  if (s.ddp) {
    ddpScript = besideGyre("gyre_ddp_train.py");
    GYRE_USAGE_CHECK(std::filesystem::exists(ddpScript), "--baseline ddp needs ", ddpScript,
                     ", which the build copies there from bench/ddp_train.py (build target gyre)");
    std::string why;
    python = findTorchPython(f, why);
    if (python.empty()) {
      ddpSkip = "skipped: no python3 with torch (install python3-torch; or pass --python PATH): " + why;
      s.ddp = false;
      fmt::print(f.json ? stderr : stdout, "ddp baseline {}\n", ddpSkip);
    }
  }
  if (!f.json) fmt::print("{}", machineText(ctx));
  if (ctx.loadAverage > 0.5 * ctx.usableCores)
    fmt::print(stderr,
               "warning: the machine is busy (load average {:.2f} on {} cores): the figures will be low "
               "and noisy; run nothing else meanwhile, or raise --repeat\n",
               ctx.loadAverage, ctx.usableCores);
  launcher::installInterruptHandlers();
  TrainBench bench(f, worker, python, ddpScript);

  std::vector<TargetCheck> checks;
  for (const std::string& model : s.models) {
    const std::vector<TrainConfig> plan = planModel(s, model);
    if (!f.json) {
      fmt::print("\n{}", settingsText(plan.front(), ctx));
      std::fflush(stdout);
    }
    std::vector<ConfigResult> results;
    try {
      sweepInRounds<RunFigures>(
          plan.size(), f.repeat,
          [&](std::size_t i, int round) {
            if (i == 0 && f.repeat > 1) fmt::print(stderr, "{}: round {} of {}\n", model, round, f.repeat);
            return bench.runOnce(plan[i]);
          },
          [&](std::size_t i, const std::vector<RunFigures>& runs) {
            if (i == 0 && !f.json) fmt::print("{}", tableHeader());  // after the round messages
            results.push_back(report(plan[i], runs, ctx, f.json));
          });
    } catch (const RunFailed& e) {
      fmt::print(stderr, "gyre bench train: {}\n", e.what());
      return e.code();
    }
    const std::vector<TargetCheck> modelChecks =
        evaluateTargets(model, results, f.baseline == "ddp", ddpSkip);
    checks.insert(checks.end(), modelChecks.begin(), modelChecks.end());
  }
  if (f.json) {
    fmt::print("{}\n", summaryJson(checks, ctx).dump());
  } else {
    fmt::print("\nsummary (global batch {}; {} of {} run{} per configuration)\n{}{}\n", s.globalBatch,
               toString(ctx.pick), ctx.repeat, ctx.repeat == 1 ? "" : "s", targetsText(checks),
               targetsTally(checks));
  }
  return 0;
}

}  // namespace

void addBenchTrain(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<TrainBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "train", "Training throughput: gyre's workers against the plain libtorch loop and PyTorch DDP");
  cmd->footer(
      "Runs, one after another: the plain single-process loop over a grid of torch:BLAS threads, the plain\n"
      "loop at each world's per-worker batch (the reference of E(W)), gyre with every --np (1 torch + 1\n"
      "BLAS thread per worker), and with --baseline ddp PyTorch DDP (gloo). Prints samples/s, the\n"
      "step-time split and gyre's throughput goals (PASS/MISS). Exits 0 whatever the goals say.\n"
      "See docs/benchmarks.md, \"gyre bench train\".\n\n"
      "Examples:\n"
      "  gyre bench train --model mlp,cnn --np 1,2 --baseline ddp\n"
      "  gyre bench train --model cnn --np 1,2 --repeat 3 --pick median --json\n"
      "  gyre bench train --model mlp --np 1,2 --steps 20 --threads-grid 1:1   # a quick smoke run");
  cmd->add_option("--model", f->models, "Models, comma-separated: mlp, cnn")->capture_default_str();
  cmd->add_option("--np", f->np, "Worker counts for gyre (and DDP), comma-separated")->capture_default_str();
  cmd->add_option("--batch", f->batch, "Global batch: per worker it is BATCH / workers")
      ->capture_default_str();
  cmd->add_option("--steps", f->steps, "Steps per run; 0: mlp 900, cnn 120 (several seconds each)")
      ->capture_default_str();
  cmd->add_option("--skip", f->skip, "Steps at the start of each run that are not timed")
      ->capture_default_str();
  cmd->add_option("--repeat", f->repeat, "Runs of each configuration")->capture_default_str();
  cmd->add_option("--pick", f->pick, "Which run of the repeats to report: best (highest samples/s) or median")
      ->check(CLI::IsMember({"best", "median"}))
      ->capture_default_str();
  cmd->add_option("--threads-grid", f->threadsGrid,
                  "TORCH:BLAS thread pairs of the plain loop at the global batch; default: 1:1,1:2,2:2")
      ->capture_default_str();
  cmd->add_option("--baseline", f->baseline,
                  "ddp: also run PyTorch DDP with the gloo backend (python3-torch)")
      ->check(CLI::IsMember({"ddp", "none"}))
      ->capture_default_str();
  cmd->add_flag("--json", f->json,
                "One JSON object per configuration and a summary object, instead of the table");
  cmd->add_option("--lr", f->lr, "SGD learning rate")->capture_default_str();
  cmd->add_option("--momentum", f->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the model and the shuffling")->capture_default_str();
  cmd->add_option("--compression", f->compression, "Gradient compression of gyre's workers")
      ->check(CLI::IsMember({"none", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--shard-optimizer", f->shardOptimizer,
                "gyre's workers shard the optimizer step (gyre train --shard-optimizer)");
  cmd->add_option("--data-dir", f->dataDir,
                  "Fashion-MNIST's IDX files (default: the worker's, Debian's path)");
  cmd->add_option("--worker", f->worker, "The gyre_train_worker program (default: next to gyre)");
  cmd->add_option("--python", f->python,
                  "python3 with torch for --baseline ddp (default: python3 on PATH, then /usr/bin/python3)");
  cmd->add_option("--timeout", f->timeoutS, "Seconds one run may take before it is stopped")
      ->capture_default_str();
  cmd->callback([f, &action] { action = [f] { return runTrainBench(*f); }; });
}

}  // namespace gyre::app
