// What `gyre bench ps` prints: for the throughput part a settings block and a row per number of
// servers, for the time-to-accuracy part a row per mode and straggler and a line naming the
// winners; with --json, one JSON object per part instead (docs/benchmarks.md, `gyre bench ps`,
// lists the fields). Pure: tests/unit/bench_ps_test.cc checks it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_machine.h"
#include "bench_ps_plan.h"

namespace gyre::app {

// The machine's cores and its load average at the start (bench_machine.h).
using PsMachine = BenchMachine;

// ---- part 1 --------------------------------------------------------------------------------

// One number of servers, measured over the timed steps of every worker.
struct ThroughputPoint {
  int servers = 0;
  int workers = 0;
  std::uint64_t steps = 0;  // timed steps, summed over the workers
  double seconds = 0;       // from the start of the timed steps to the last worker's end
  std::uint64_t bytesPushed = 0, bytesPulled = 0;  // over the timed steps (ps::WorkerStats)
  std::vector<std::uint64_t> serverUpdates;        // per server (ps::ServerStats::updates)
  std::vector<std::uint64_t> staleness;            // the servers' counts, summed
  double clockWaitS = 0;                           // summed over the workers
  std::vector<std::uint64_t> serverReplicated;     // per server: updates applied as a backup
  std::vector<std::uint64_t> serverBytes;          // per server: bytes in + out

  double stepsPerS() const { return seconds > 0 ? static_cast<double>(steps) / seconds : 0; }
  double megabytesPerS() const {
    return seconds > 0 ? static_cast<double>(bytesPushed + bytesPulled) / seconds / 1e6 : 0;
  }
};

// "machine: 2 usable cores (2 online), load average 0.10; servers and workers are threads of
// this one process and share these cores" and the model's keys.
std::string throughputSettingsText(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                   const PsMachine& m);
std::string throughputHeader(const ThroughputSettings& s);
// speedup: steps/s against `reference` (the point with the fewest servers); absent: "-".
std::string throughputRow(const ThroughputPoint& p, std::optional<double> referenceStepsPerS);
// The point with the fewest servers, the reference of every speedup; nullptr when empty.
const ThroughputPoint* throughputReference(const std::vector<ThroughputPoint>& points);
// The conclusion under the table: the speedup from the fewest to the most servers, how evenly
// the most servers shared the updates, and, when there was little gain, that the servers shared
// the workers' cores (so sharding spread no work over more hardware).
std::string throughputSummary(const std::vector<ThroughputPoint>& points, const PsMachine& m);
nlohmann::ordered_json throughputJson(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                      const std::vector<ThroughputPoint>& points, const PsMachine& m);

// The throughput part as a worker of `gyre run --servers S` (bench_ps_launched.h): what rank 0
// prints. The settings say the job's servers and workers are processes of their own, wherever
// gyre run placed them; the row is throughputHeader's, without a speedup or server figures.
std::string launchedThroughputSettingsText(const ThroughputSettings& s,
                                           const std::vector<std::size_t>& keySizes,
                                           const ThroughputPoint& p);
// One flat object: {"bench":"ps","part":"throughput","launched":true,"servers":S,"workers":W,
// "floats":N,"mode":..,"replicate":..,"steps":..,"seconds":..,"steps_per_s":..,
// "worker_steps_per_s_min":..,"mb_per_s":..,...} (docs/benchmarks.md lists the fields).
nlohmann::ordered_json launchedThroughputJson(const ThroughputSettings& s,
                                              const std::vector<std::size_t>& keySizes,
                                              const ThroughputPoint& p, double minWorkerStepsPerS,
                                              const PsMachine& m);

// ---- part 2 --------------------------------------------------------------------------------

struct AccuracyRow {
  AccuracyRun run;
  bool ok = false;
  std::string error;       // when !ok: why the run failed
  double wallS = 0;        // the whole `gyre train`, as this command saw it
  TimeToAccuracy tta;      // from eval.jsonl
  double samplesPerS = 0;  // trainingSamplesPerS(tta, batch)
  RunTotals totals;        // from metrics.jsonl
  std::string runDir;
};

// The figures of a run that finished, from its eval.jsonl lines (the time to s.target, samples/s)
// and its metrics.jsonl lines (the totals): row.ok, or row.error when a line is malformed or there
// is no evaluation in `evalPath`.
void readAccuracyRecords(AccuracyRow& row, const AccuracySettings& s,
                         const std::vector<std::string>& evalLines,
                         const std::vector<std::string>& metricsLines, const std::string& evalPath);

std::string accuracySettingsText(const AccuracySettings& s, const PsMachine& m);
std::string accuracyHeader(const AccuracySettings& s);
std::string accuracyRow(const AccuracyRow& r);

// The winner among the rows with (or without) the straggler that ran: the least time to the
// target among those that reached it, else the best accuracy; nullptr when no such row ran.
const AccuracyRow* accuracyWinner(const std::vector<AccuracyRow>& rows, bool straggler);
// "winner without a straggler: ps:asp (0.85 in 41.2 s)" and, when straggler rows ran, the same
// with the straggler, one line each.
std::string winnerText(const AccuracySettings& s, const std::vector<AccuracyRow>& rows);
nlohmann::ordered_json accuracyJson(const AccuracySettings& s, const std::vector<AccuracyRow>& rows,
                                    const PsMachine& m);

}  // namespace gyre::app
