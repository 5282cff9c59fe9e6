// What `gyre bench train` prints: per model a settings line and a table for people, then a block
// with each target, its measured value and PASS/MISS; with --json, one object per configuration
// and one summary object instead (docs/benchmarks.md, `gyre bench train`, lists the fields).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_machine.h"
#include "bench_train_plan.h"

namespace gyre::app {

// How the figures were taken, printed with them.
struct TrainReportContext {
  int repeat = 1;
  Pick pick = Pick::kBest;
  double lr = 0.05;
  double momentum = 0.9;
  std::string compression = "none";
  bool shardOptimizer = false;  // gyre's workers above one run with --shard-optimizer
  int usableCores = 0;          // this process's CPUs
  double loadAverage = -1;      // the 1-minute load average at the start; < 0: unknown
};

// The context of the flags (--repeat, --pick, the optimizer, --compression, --shard-optimizer)
// on machine `m`.
TrainReportContext trainReportContext(const TrainBenchFlags& f, const BenchMachine& m);

// "2 usable cores, load average 0.12 at the start": how busy the machine was.
std::string machineText(const TrainReportContext& ctx);

// "model mlp: global batch 128, 900 steps per run ..." and the threads legend.
std::string settingsText(const TrainConfig& any, const TrainReportContext& ctx);
std::string tableHeader();
// One row; the thread columns are what the process reported, with a `!` where that differs
// from what was asked.
std::string tableRow(const ConfigResult& r);
// "targets (mlp):" and a line per target.
std::string targetsText(const std::vector<TargetCheck>& checks);
// "3 PASS, 1 MISS, 0 SKIP" over every model.
std::string targetsTally(const std::vector<TargetCheck>& checks);

// (fastest - slowest) / fastest over a configuration's runs: how noisy the machine was.
double runSpread(const std::vector<double>& runs);

// True when the process reported threads that differ from the configuration's.
bool threadsDiffer(const ConfigResult& r);
// When they differ, "warning: mlp gyre asked for torch 1 blas 1 threads; the process reported 2
// and 1" and a newline; "" otherwise.
std::string threadsWarning(const ConfigResult& r);

// After the last model: "summary (global batch 128; best of 3 runs per configuration)", the
// targets of every model and their tally.
std::string summaryText(const std::vector<TargetCheck>& checks, const TrainReportContext& ctx,
                        int globalBatch);

nlohmann::json configJson(const ConfigResult& r, const TrainReportContext& ctx);
nlohmann::json summaryJson(const std::vector<TargetCheck>& checks, const TrainReportContext& ctx);

}  // namespace gyre::app
