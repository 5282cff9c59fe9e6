#include "bench_parallel.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_parallel_plan.h"
#include "bench_parallel_report.h"
#include "bench_sweep.h"
#include "bench_trainer.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct ParallelBenchFlags {
  ParallelBenchSettings settings;
  std::string schedules = "gpipe,1f1b,zero-bubble,interleaved";
  std::string microBatches = "1,2,4,8,16";
  RunRootFlags runs;
  bool json = false;
};

// One run of layout `c` in `dir`: its epochs' figures from its log. Throws RunFailed when the run
// fails or prints no figures.
ParallelResult runLayout(const ParallelBenchSettings& s, const ParallelConfig& c, const std::string& worker,
                         const fs::path& dir) {
  const std::string name = "gyre bench parallel: " + c.name;
  const ChildRun child =
      runTrainingJob(name, parallelRunArguments(s, c, worker), dir, "gyre-run.log", s.timeoutS);
  if (!child.ok) throw RunFailed(name + ": " + child.error, 1);
  const fs::path log = dir / "gyre-run.log";
  std::vector<ParallelFigures> epochs;
  for (const std::string& line : readLines(log))
    if (std::optional<ParallelFigures> e = parseParallelLine(line)) epochs.push_back(*e);
  if (epochs.empty()) throw RunFailed(name + " printed no figures (" + log.string() + ")", 1);
  return {c, combineParallel(epochs)};
}

int runParallelBench(ParallelBenchFlags f) {
  ParallelBenchSettings& s = f.settings;
  s.schedules = parseScheduleList(f.schedules);
  s.microBatches = parseMicroBatchList(f.microBatches);
  validate(s);
  requireTrainWorker("gyre bench parallel");
  requireNoLauncher("gyre bench parallel");
  const std::string worker = trainWorkerBesideTool();
  const RunRoot runRoot(f.runs, "gyre bench parallel");
  launcher::installInterruptHandlers();
  const std::vector<ParallelConfig> plan = planParallel(s);
  if (!f.json) {
    fmt::print("{}{}", parallelSettingsText(s), parallelHeader());
    std::fflush(stdout);
  }
  // A row shows its median run (by samples/s).
  std::vector<ParallelResult> results;
  try {
    sweepInRounds<ParallelResult>(
        plan.size(), s.repeat,
        [&](std::size_t i, int round) {
          fmt::print(stderr, "gyre bench parallel: round {} of {}, run {} of {}: {}\n", round, s.repeat,
                     i + 1, plan.size(), plan[i].name);
          return runLayout(s, plan[i], worker, runRoot.path() / fmt::format("run-{:02}-{}", i, round));
        },
        [&](std::size_t, const std::vector<ParallelResult>& runs) {
          std::vector<RunFigures> figures;
          for (const ParallelResult& r : runs) figures.push_back(r.figures.run);
          results.push_back(runs[pickRun(figures, Pick::kMedian)]);
          fmt::print("{}",
                     f.json ? parallelRowJson(results.back()).dump() + "\n" : parallelRow(results.back()));
          std::fflush(stdout);
        });
  } catch (const RunFailed& e) {
    fmt::print(stderr, "{}\n", e.what());
    runRoot.done(/*failed=*/true);
    return e.code();
  }
  const std::vector<TargetCheck> checks = evaluateParallelTargets(s.model, results);
  if (f.json)
    fmt::print("{}\n", parallelSummaryJson(checks).dump());
  else
    fmt::print("{}", parallelSummaryText(checks));
  runRoot.done(/*failed=*/false);
  return 0;
}

}  // namespace

void addBenchParallel(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<ParallelBenchFlags>();
  ParallelBenchSettings& s = f->settings;
  CLI::App* cmd = bench.add_subcommand(
      "parallel", "Data, pipeline and sharded parallelism side by side: throughput, bubble, memory");
  cmd->footer(
      "Runs gyre_train_worker under `gyre run`, one thread per worker, once per layout and round "
      "(--repeat):\n"
      "1 worker; dp=2; dp=2 with the sharded optimizer step (ZeRO-1), the gradients sharded too (ZeRO-2) "
      "and\n"
      "everything sharded (ZeRO-3);\n"
      "pp=2 for each --schedule and --micro-batches (interleaved: even m, --virtual-stages per worker); on "
      "4\n"
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
  cmd->add_option("--skip", s.skip, "Steps at the start of each run that are not timed")
      ->capture_default_str();
  cmd->add_option("--schedule", f->schedules, "Pipeline schedules, comma-separated")->capture_default_str();
  cmd->add_option("--micro-batches", f->microBatches,
                  "Micro-batch counts of the pipeline rows, comma-separated")
      ->capture_default_str();
  cmd->add_option("--balance", s.balance, "How the pipeline's stages are cut: time or even")
      ->capture_default_str();
  cmd->add_option("--virtual-stages", s.virtualStages, "Stages per worker of the interleaved rows")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "One JSON object per layout and a summary object, instead of the table");
  cmd->add_option("--repeat", s.repeat,
                  "Runs of each layout, in rounds; a row shows the median (by samples/s)")
      ->capture_default_str();
  addRunRootOptions(*cmd, f->runs);
  cmd->add_option("--timeout", s.timeoutS, "Seconds one run may take before it is stopped")
      ->capture_default_str();
  cmd->callback([f, &action] { action = [f] { return runParallelBench(*f); }; });
}

}  // namespace gyre::app
