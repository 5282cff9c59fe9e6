// What `gyre bench parallel` prints: a settings line, then a row per layout (samples/s, the
// measured pipeline bubble beside its formula and the stage times' own, memory per worker, the
// step split, the stages' balance), then a legend and the targets with PASS/MISS; with --json,
// one object per layout and a summary object instead (docs/benchmarks-parallel.md). Pure:
// tests/unit/bench_parallel_test.cc checks it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_parallel_plan.h"

namespace gyre::app {

// "model vit: global batch 512, 20 steps per run (3 untimed), 1 thread per worker, balance time,
// the median of 3 runs per row".
std::string parallelSettingsText(const ParallelBenchSettings& s);
std::string parallelHeader();
std::string parallelRow(const ParallelResult& r);
// {"layout":..,"np":..,"pp":..,"schedule":..|null,...,"samples_per_s":..,"bubble":..|null,...}
nlohmann::json parallelRowJson(const ParallelResult& r);

// Under the table: what the columns mean, then the targets and their tally (bench_train_report.h).
std::string parallelSummaryText(const std::vector<TargetCheck>& checks);
// {"summary":true,"targets":[{"name":..,"status":..,"measured":..|null,"threshold":..|null,
// "definition":..}, ...]}
nlohmann::json parallelSummaryJson(const std::vector<TargetCheck>& checks);

}  // namespace gyre::app
