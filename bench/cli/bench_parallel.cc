#include "bench_parallel.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_parallel_plan.h"
#include "bench_sweep.h"
#include "bench_train_report.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "common/config.h"
#include "gyre/init.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct ParallelBenchFlags {
  ParallelBenchSettings settings;
  std::string schedules = "gpipe,1f1b,zero-bubble,interleaved";
  std::string microBatches = "1,2,4,8,16";
  std::string runRoot;
  bool keepRuns = false;
  bool json = false;
  int repeat = 1;
  double timeoutS = 600;
};

std::string mib(std::optional<std::int64_t> bytes) {
  return bytes ? fmt::format("{:.1f}", static_cast<double>(*bytes) / (1 << 20)) : "-";
}

std::string share(std::optional<double> value) {
  return value ? fmt::format("{:.1f}%", 100 * *value) : "-";
}

std::string header() {
  return fmt::format("{:<26} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>6} {:>6}  {}\n", "layout",
                     "np", "samples/s", "bubble", "formula", "stages", "rss MiB", "state MiB", "activ MiB", "compute", "comm",
                     "wait", "balance");
}

std::string row(const ParallelResult& r) {
  const ParallelFigures& f = r.figures;
  const RunFigures& run = f.run;
  std::string balance;
  for (int n : f.balance) balance += (balance.empty() ? "" : ",") + std::to_string(n);
  return fmt::format("{:<26} {:>5} {:>10.0f} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>6} {:>6}  {}\n",
                     r.config.name, r.config.world, run.samplesPerS, share(f.bubble), share(f.idealBubble),
                     share(f.stageTimesBubble),
                     mib(f.peakRssBytes), mib(f.modelStateBytes), mib(f.peakActivationBytes),
                     share(run.computeShare()), share(run.communicateShare()), share(run.waitShare()), balance);
}

nlohmann::json rowJson(const ParallelResult& r) {
  const ParallelFigures& f = r.figures;
  auto orNull = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"layout", r.config.name},
          {"np", r.config.world},
          {"pp", r.config.pp},
          {"schedule", r.config.pp > 1 ? nlohmann::json(r.config.schedule) : nlohmann::json(nullptr)},
          {"virtual_stages", r.config.virtualStages},
          {"micro_batches", r.config.pp > 1 ? nlohmann::json(r.config.microBatches) : nlohmann::json(nullptr)},
          {"zero", r.config.zero},
          {"tp", r.config.tp},
          {"vit_width", r.config.vitWidth > 0 ? nlohmann::json(r.config.vitWidth) : nlohmann::json(nullptr)},
          {"batch", r.config.batch > 0 ? nlohmann::json(r.config.batch) : nlohmann::json(nullptr)},
          {"samples_per_s", f.run.samplesPerS},
          {"bubble", orNull(f.bubble)},
          {"ideal_bubble", orNull(f.idealBubble)},
          {"stage_times_bubble", orNull(f.stageTimesBubble)},
          {"peak_rss_bytes", f.peakRssBytes},
          {"model_state_bytes", orNull(f.modelStateBytes)},
          {"peak_activation_bytes", orNull(f.peakActivationBytes)},
          {"balance", f.balance},
          {"compute_s", f.run.computeS},
          {"communicate_s", f.run.communicateS},
          {"wait_s", f.run.waitS},
          {"seconds", f.run.seconds},
          {"timed_steps", f.run.steps}};
}

ParallelResult runOne(const ParallelBenchFlags& f, const ParallelConfig& c, const std::string& worker,
                      const fs::path& dir) {
  const ParallelBenchSettings& s = f.settings;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run directory " + dir.string() + ": " + ec.message());
  const EpochSplit split = splitSteps(s.steps, c.batch > 0 ? c.batch : s.globalBatch);
  // Every layout through gyre run, one alone too: the same threads (1 for libtorch and OpenBLAS).
  std::vector<std::string> argv = {launcher::selfExecutable(),
                                   "run",
                                   "--np",
                                   std::to_string(c.world),
                                   "--threads",
                                   "1",
                                   "--no-tag-output",
                                   "--",
                                   worker,
                                   "--model",
                                   s.model,
                                   "--epochs",
                                   std::to_string(split.epochs),
                                   "--max-steps",
                                   std::to_string(split.stepsPerEpoch),
                                   "--batch",
                                   std::to_string(c.batch > 0 ? c.batch : s.globalBatch),
                                   "--skip-steps",
                                   std::to_string(s.skip),
                                   "--threads",
                                   "1",
                                   "--no-eval",
                                   "--json",
                                   "--progress",
                                   "off"};
  for (std::string& flag : c.flags(s.balance)) argv.push_back(std::move(flag));
  const fs::path log = dir / "gyre-run.log";
  const ChildRun child = runLoggedChild("gyre bench parallel: " + c.name, argv, log, f.timeoutS);
  if (!child.ok) throw RunFailed("gyre bench parallel: " + c.name + ": " + child.error, 1);
  std::vector<ParallelFigures> epochs;
  for (const std::string& line : readLines(log))
    if (std::optional<ParallelFigures> e = parseParallelLine(line)) epochs.push_back(*e);
  if (epochs.empty()) throw RunFailed("gyre bench parallel: " + c.name + " printed no figures (" + log.string() + ")", 1);
  return {c, combineParallel(epochs)};
}

int runParallelBench(ParallelBenchFlags f) {
  ParallelBenchSettings& s = f.settings;
  s.schedules = parseScheduleList(f.schedules);
  s.microBatches = parseMicroBatchList(f.microBatches);
  validate(s);
  GYRE_USAGE_CHECK(f.timeoutS > 0, "--timeout must be positive");
  GYRE_USAGE_CHECK(f.repeat >= 1 && f.repeat <= 100, "--repeat must be between 1 and 100 (got ", f.repeat,
                   ")");
  requireTrainWorker("gyre bench parallel");
  requireNoLauncher("gyre bench parallel");
  const std::string worker = trainWorkerBesideTool();
  const RunRoot runRoot(f.runRoot, "gyre bench parallel");
  launcher::installInterruptHandlers();
  const std::vector<ParallelConfig> plan = planParallel(s);
  if (!f.json) {
    fmt::print("model {}: global batch {}, {} steps per run ({} untimed), 1 thread per worker, balance {}, the "
               "median of {} run{} per row\n{}",
               s.model, s.globalBatch, s.steps, s.skip, s.balance, f.repeat, f.repeat == 1 ? "" : "s", header());
    std::fflush(stdout);
  }
  // A row shows its median run (by samples/s).
  std::vector<ParallelResult> results;
  try {
    sweepInRounds<ParallelResult>(
        plan.size(), f.repeat,
        [&](std::size_t i, int round) {
          fmt::print(stderr, "gyre bench parallel: round {} of {}, run {} of {}: {}\n", round, f.repeat,
                     i + 1, plan.size(), plan[i].name);
          return runOne(f, plan[i], worker, runRoot.path() / fmt::format("run-{:02}-{}", i, round));
        },
        [&](std::size_t, const std::vector<ParallelResult>& runs) {
          std::vector<RunFigures> figures;
          for (const ParallelResult& r : runs) figures.push_back(r.figures.run);
          results.push_back(runs[pickRun(figures, Pick::kMedian)]);
          fmt::print("{}", f.json ? rowJson(results.back()).dump() + "\n" : row(results.back()));
          std::fflush(stdout);
        });
  } catch (const RunFailed& e) {
    fmt::print(stderr, "{}\n", e.what());
    runRoot.done(true, true);
    return e.code();
  }
  const std::vector<TargetCheck> checks = evaluateParallelTargets(s.model, results);
  if (f.json) {
    nlohmann::json targets = nlohmann::json::array();
    for (const TargetCheck& t : checks)
      targets.push_back({{"name", t.name},
                         {"status", t.status()},
                         {"measured", t.measured ? nlohmann::json(*t.measured) : nlohmann::json(nullptr)},
                         {"threshold", t.threshold ? nlohmann::json(*t.threshold) : nlohmann::json(nullptr)},
                         {"definition", t.definition}});
    fmt::print("{}\n", nlohmann::json{{"summary", true}, {"targets", targets}}.dump());
  } else {
    fmt::print("\nbubble: the share of a step a worker spent outside its stages' compute, averaged over the "
               "workers; formula (p-1)/(m+p-1) (equal stages); stages: the bubble the measured stage times alone "
               "make (free communication), step by step; rss: the largest worker's high-water mark; state: parameters, "
               "gradients and optimizer state of the largest worker; activ: the most activation bytes a "
               "pipeline worker held\n\n{}{}\n",
               targetsText(checks), targetsTally(checks));
  }
  runRoot.done(f.keepRuns, false);
  return 0;
}

}  // namespace

void addBenchParallel(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<ParallelBenchFlags>();
  ParallelBenchSettings& s = f->settings;
  CLI::App* cmd = bench.add_subcommand(
      "parallel", "Data, pipeline and sharded parallelism side by side: throughput, bubble, memory");
  cmd->footer(
      "Runs gyre_train_worker under `gyre run`, one thread per worker, once per layout and round (--repeat):\n"
      "1 worker; dp=2; dp=2 with the sharded optimizer step (ZeRO-1), the gradients sharded too (ZeRO-2) and\n"
      "everything sharded (ZeRO-3);\n"
      "pp=2 for each --schedule and --micro-batches (interleaved: even m, --virtual-stages per worker); on 4\n"
      "workers dp=2 x pp=2, dp=4 and dp=4 ZeRO-3; with the vit also tp=2 and dp=2 x tp=2, then 1 worker and\n"
      "tp=2 on a vit of width 512 (8 heads) at batch 128. Prints\n"
      "samples/s, the measured pipeline bubble beside its formula, memory per worker and the step split,\n"
      "then the targets (PASS/MISS). Exits 0 whatever the targets say.\n"
      "See docs/benchmarks-parallel.md.\n\n"
      "Examples:\n"
      "  gyre bench parallel --repeat 3                       # the vit, every schedule, m = 1..16\n"
      "  gyre bench parallel --schedule 1f1b --micro-batches 4 --steps 12 --skip 2   # a quick smoke run");
  cmd->add_option("--model", s.model, "mlp, cnn or vit")->capture_default_str();
  cmd->add_option("--batch", s.globalBatch, "Global batch")->capture_default_str();
  cmd->add_option("--steps", s.steps, "Steps per run")->capture_default_str();
  cmd->add_option("--skip", s.skip, "Steps at the start of each run that are not timed")->capture_default_str();
  cmd->add_option("--schedule", f->schedules, "Pipeline schedules, comma-separated")->capture_default_str();
  cmd->add_option("--micro-batches", f->microBatches, "Micro-batch counts of the pipeline rows, comma-separated")
      ->capture_default_str();
  cmd->add_option("--balance", s.balance, "How the pipeline's stages are cut: time or even")->capture_default_str();
  cmd->add_option("--virtual-stages", s.virtualStages, "Stages per worker of the interleaved rows")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "One JSON object per layout and a summary object, instead of the table");
  cmd->add_option("--repeat", f->repeat, "Runs of each layout, in rounds; a row shows the median (by samples/s)")
      ->capture_default_str();
  cmd->add_option("--run-root", f->runRoot, "Where the runs' directories go (default: a temporary directory)");
  cmd->add_flag("--keep-runs", f->keepRuns, "Keep the runs' directories (logs, metrics.jsonl)");
  cmd->add_option("--timeout", f->timeoutS, "Seconds one run may take before it is stopped")->capture_default_str();
  cmd->callback([f, &action] { action = [f] { return runParallelBench(*f); }; });
}

}  // namespace gyre::app
