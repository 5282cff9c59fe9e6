// progress.jsonl: where a run is, written as it goes, for whoever watches the run directory (the
// fault-injection harness, scripts/fault-injection.py, measures the work a failure lost with it).
// Rank 0 appends one line when a generation starts and one when each step ends:
//
//   {"generation":0,"start_step":0}
//   {"generation":0,"step":1,"time":1764163200.123,"rank_ms":[3.812,2.301]}
//   ...
//   {"generation":1,"start_step":40}      (a restart that resumed from the checkpoint of step 40)
//
// Each line is one write(2) to a file opened with O_APPEND and is not synced: a killed worker's
// lines are in the page cache and stay, a crash of the machine may lose the last ones. steps.jsonl
// and metrics.jsonl are the records of what was trained; this file is the story of the attempts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::train {

// Not thread-safe: the training thread writes it.
class StepLog {
 public:
  // A log that writes nothing.
  StepLog() = default;
  // Opens `path`, emptied unless `append` (a resumed run continues the story). Throws gyre::Error
  // naming the path when it cannot.
  StepLog(const std::string& path, bool append);
  ~StepLog();
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;
  StepLog(StepLog&& other) noexcept;
  StepLog& operator=(StepLog&& other) noexcept;

  // Generation `generation` starts after global step `step` (0: from scratch).
  void start(int generation, std::int64_t step);
  // Global step `step` (from 1) is done at `time` (Unix seconds, to the millisecond); `rankMs`
  // are the step's times by rank (DistributedOptimizer::stepTimes() in milliseconds: from the end
  // of a rank's previous step to its gradients being ready), left out when empty. What `gyre
  // report` draws loss against seconds and the per-rank heat map from. Throws gyre::Error when
  // the line cannot be written.
  void step(int generation, std::int64_t step, double time, const std::vector<double>& rankMs);

 private:
  void append(const std::string& line);

  int fd_ = -1;
  std::string path_;
};

}  // namespace gyre::train
