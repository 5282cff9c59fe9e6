#include "bench_ps_accuracy.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_trainer.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

AccuracyRow runAccuracyJob(const AccuracySettings& s, const AccuracyRun& run, const fs::path& dir) {
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
  readAccuracyRecords(row, s, readLines(dir / "eval.jsonl"), readLines(dir / "metrics.jsonl"),
                      (dir / "eval.jsonl").string());
  return row;
}

}  // namespace

int runAccuracyPart(const PsBenchFlags& f, const PsMachine& m) {
  const AccuracySettings& s = f.accuracy;
  const RunRoot runRoot(f.runs, "gyre bench ps");
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
    rows.push_back(runAccuracyJob(s, runs[i], root / runs[i].dirName()));
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
  runRoot.done(failed);
  return failed ? 1 : 0;
}

}  // namespace gyre::app
