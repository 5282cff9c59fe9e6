#include "bench_train.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_machine.h"
#include "bench_sweep.h"
#include "bench_train_plan.h"
#include "bench_train_report.h"
#include "bench_train_run.h"
#include "bench_trainer.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

int runTrainBench(const TrainBenchFlags& f) {
  TrainBenchSettings s = trainSettingsFrom(f);
  requireNoLauncher("gyre bench train");
  const BenchMachine machine = thisMachine();
  const TrainReportContext ctx = trainReportContext(f, machine);
  const TrainPrograms programs = findTrainPrograms(f, s.ddp);
  if (!programs.ddpSkipped.empty()) {
    s.ddp = false;
    fmt::print(f.json ? stderr : stdout, "ddp baseline {}\n", programs.ddpSkipped);
  }
  if (!f.json) fmt::print("{}", machineText(ctx));
  fmt::print(stderr, "{}", busyWarning(machine, "; run nothing else meanwhile, or raise --repeat"));
  launcher::installInterruptHandlers();

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
            return runTrainConfig(plan[i], f, programs);
          },
          [&](std::size_t i, const std::vector<RunFigures>& runs) {
            if (i == 0 && !f.json) fmt::print("{}", tableHeader());  // after the round messages
            const ConfigResult& r = results.emplace_back(resultOf(plan[i], runs, ctx.pick));
            fmt::print(stderr, "{}", threadsWarning(r));
            fmt::print("{}", f.json ? configJson(r, ctx).dump() + "\n" : tableRow(r));
            std::fflush(stdout);
          });
    } catch (const RunFailed& e) {
      fmt::print(stderr, "gyre bench train: {}\n", e.what());
      return e.code();
    }
    const std::vector<TargetCheck> modelChecks =
        evaluateTargets(model, results, f.baseline == "ddp", programs.ddpSkipped);
    checks.insert(checks.end(), modelChecks.begin(), modelChecks.end());
  }
  if (f.json)
    fmt::print("{}\n", summaryJson(checks, ctx).dump());
  else
    fmt::print("{}", summaryText(checks, ctx, s.globalBatch));
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
