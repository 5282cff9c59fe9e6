// What `gyre bench rt` prints: a settings line and a row per measurement, with PASS or MISS where
// the row has a target, or with --json one object per row (docs/benchmarks.md, "gyre bench rt").
// The targets, and how the rounds of a row become its figure, are here too. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_rt_plan.h"

namespace gyre::app {

struct RtRow {
  std::string name;   // Ray's name for it
  std::string where;  // "in process" or "over loopback TCP"
  double perSecond = 0;
  double target = 0;       // 0: none
  int threads = 0;         // per process; 0: --threads
  double receivedMb = -1;  // --across-hosts: what the reader's host received; -1: not measured
};

// Sets the targets of one round's rows: 20k sync tasks/s, 100k async tasks/s and 20k sync actor
// calls/s (Ray's figures), and half of the memcpy row's GB/s for the puts and gets in shared
// memory (none without a memcpy row).
void setRtTargets(std::vector<RtRow>& rows);

// The rows of the first round, each with the median of its figure over the rounds (every round
// measures the same rows in the same order). Needs at least one round.
std::vector<RtRow> medianOfRounds(const std::vector<std::vector<RtRow>>& rounds);

// The settings line, the header and a row per measurement (GB/s for the 100 MB rows, calls or
// steps per second for the others).
std::string rtTable(const RtBenchSettings& s, const std::vector<RtRow>& rows, unsigned hardwareThreads);
// {"benchmark":..,"where":..,"per_s":..,"target_per_s":..|null,"threads":..,"received_mb":..|null,
// "repeat":..,"hardware_threads":..}
nlohmann::json rtRowJson(const RtRow& r, const RtBenchSettings& s, unsigned hardwareThreads);

}  // namespace gyre::app
