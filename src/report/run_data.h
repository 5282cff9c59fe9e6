// What `gyre report` reads: a run directory of gyre train (config.json, metrics.jsonl,
// steps.jsonl, progress.jsonl; docs/training.md, "The run directory") and the JSON lines of
// `gyre bench collectives --json`. Libtorch-free; reading only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "train/records.h"

namespace gyre::report {

// An epoch as gyre train recorded it in metrics.jsonl (train/records.h).
using Epoch = train::EpochRecord;

struct StepTime {
  std::int64_t step = 0;
  double time = 0;             // Unix seconds
  std::vector<double> rankMs;  // by rank; empty when the ranks did not share them
};

struct Run {
  std::string dir;
  std::string name;  // the directory's last part
  int world = 1;
  std::string model, mode = "allreduce";
  int batch = 0;
  std::vector<Epoch> epochs;
  std::vector<std::int64_t> stepNumbers;  // steps.jsonl
  std::vector<double> stepLosses;
  std::vector<StepTime> stepTimes;  // progress.jsonl: the newest record of each step
};

struct BenchPoint {
  double bytes = 0;
  double busbw = 0;                 // GB/s
  std::optional<double> peerBusbw;  // mpi_busbw_GBps (--baseline mpi)
};
struct BenchSeries {
  std::string file;
  std::string label;  // "allreduce ring, 4 ranks, float32"
  std::vector<BenchPoint> points;
};

// Reads a run directory. Throws InvalidArgument naming the directory and the files it looked for
// when it holds no run (no metrics.jsonl and no steps.jsonl), and naming the file and line of a
// malformed record.
Run loadRun(const std::string& dir);

// Reads a `gyre bench collectives --json` output: one series per (op, algorithm, ranks, dtype,
// transport). Throws InvalidArgument naming the file when it holds no such line.
std::vector<BenchSeries> loadBench(const std::string& path);

}  // namespace gyre::report
