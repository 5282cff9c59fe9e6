// `gyre bench parallel` apart from running anything: the layouts it runs on one model and global
// batch, how a worker's JSON epoch line becomes a row's figures, and the model-parallel targets
// (docs/benchmarks.md) computed from the rows. No libtorch and no processes, so the unit tests
// check it on its own (tests/unit/bench_parallel_test.cc); bench_parallel.cc runs the plan and
// bench_parallel_report.h prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_train_plan.h"  // TargetCheck, EpochSplit
#include "train/options.h"

namespace gyre::app {

// One configuration: `gyre train`'s layout flags on `world` workers.
struct ParallelConfig {
  std::string name;  // "1 worker", "dp=2", "pp=2 1f1b m=8", "dp=2 x pp=2 1f1b m=4"
  int world = 1;
  int pp = 1;
  std::string schedule;   // pp > 1
  int microBatches = 0;   // pp > 1
  int virtualStages = 1;  // interleaved
  int zero = 0;           // gyre train's --zero: 1 the optimizer step sharded, 3 the parameters too
  int tp = 1;             // gyre train's --tp
  // The rows of a wider vit (the tensor-parallel speed target's): its width (heads 8) and global
  // batch; 0: the settings' model and batch.
  int vitWidth = 0;
  int batch = 0;

  // Sets the layout's fields of gyre train's options (--pp, --schedule, --micro-batches,
  // --balance, --virtual-stages, --zero, --tp, the vit's width and heads).
  void apply(train::TrainOptions& o, const std::string& balance) const;
  // Those flags alone, as a worker gets them (train::changedArguments).
  std::vector<std::string> flags(const std::string& balance) const;
};

struct ParallelBenchSettings {
  std::string model = "vit";
  // Micro-batches of 32 samples at m = 16: smaller ones (128 / 16) spend more per sample in
  // libtorch's CPU kernels than the whole batch does, which no schedule can hide.
  int globalBatch = 512;
  int steps = 20;
  int skip = 3;
  std::vector<std::string> schedules = {"gpipe", "1f1b", "zero-bubble", "interleaved"};
  int virtualStages = 2;  // interleaved: stages per worker (its rows skip odd m)
  std::vector<int> microBatches = {1, 2, 4, 8, 16};
  std::string balance = "time";
  // The tensor-parallel speed rows (model vit only): 1 worker and tp = 2 on a vit this wide
  // (8 heads), at this global batch.
  int wideWidth = 512;
  int wideBatch = 128;
  int repeat = 1;         // runs of each layout, in rounds; a row shows the median
  double timeoutS = 600;  // one run's, before it is stopped
};

// "1,2,4" -> {1, 2, 4}: each in [1, 1024], no repeats. "gpipe,1f1b" -> schedules of gyre train's.
// Throw InvalidArgument.
std::vector<int> parseMicroBatchList(const std::string& text);
std::vector<std::string> parseScheduleList(const std::string& text);
// Throws InvalidArgument for settings that cannot run: a batch that does not divide into 2
// replicas of the largest m, skip >= steps, a time-out that is not positive, repeats outside
// [1, 100].
void validate(const ParallelBenchSettings& s);

// In the order they run: 1 worker; dp = 2; dp = 2 with the sharded optimizer step (ZeRO-1), the
// gradients sharded too (ZeRO-2) and everything sharded (ZeRO-3); pp = 2 for each schedule and m
// (interleaved: even m only, virtualStages per worker); on 4 workers dp = 2 × pp = 2 (1f1b, the largest m of
// the list that is at most 8), dp = 4 and dp = 4 ZeRO-3. With the vit also tp = 2 and dp = 2 × tp = 2, then 1
// worker and tp = 2 on the wide vit (wideWidth, wideBatch).
std::vector<ParallelConfig> planParallel(const ParallelBenchSettings& s);

// The arguments after the gyre program: {"run", "--np", W, "--threads", "1", "--no-tag-output",
// "--", worker, "--model", ...}. Every layout runs under gyre run, one worker too, so that all
// have the same threads (1 for libtorch and OpenBLAS); the worker prints its epochs as JSON.
std::vector<std::string> parallelRunArguments(const ParallelBenchSettings& s, const ParallelConfig& c,
                                              const std::string& worker);

// What a row reports, from the worker's JSON epoch lines (the timed steps of every epoch).
struct ParallelFigures {
  RunFigures run;  // samples/s, time, steps, the step split (bench_train_plan.h)
  std::int64_t peakRssBytes = 0;
  std::optional<std::int64_t> modelStateBytes;
  // pp > 1
  std::optional<double> bubble;
  std::optional<double> idealBubble;
  // The bubble the measured stage times alone make (gyre train's pipeline.stage_times_bubble).
  std::optional<double> stageTimesBubble;
  std::optional<std::int64_t> peakActivationBytes;
  std::vector<int> balance;
};

// One line the worker printed: its epoch's figures when it is an epoch record (train/records.h);
// nullopt for any other line. Throws Error for a record with a mistyped field.
std::optional<ParallelFigures> parseParallelLine(const std::string& line);
// The epochs of one run together: samples/s over the summed time, memory the largest, the
// bubble weighted by each epoch's time.
ParallelFigures combineParallel(const std::vector<ParallelFigures>& epochs);

struct ParallelResult {
  ParallelConfig config;
  ParallelFigures figures;
};

// The targets of the issue that the rows measure: the bubble against its formula (GPipe and 1F1B,
// p = 2, m >= 4), zero-bubble's below 1F1B's at each m, 1F1B's activation memory at the largest m
// against GPipe's, pp = 2 1F1B m = 8 against 2 × one worker × (1 − formula), ZeRO-3's training
// state per worker against 1/N of plain dp's (N = 2, 4) and its throughput against plain dp = 2;
// tp = 2 on the wide vit against 1.3 × one worker.
std::vector<TargetCheck> evaluateParallelTargets(const std::string& model,
                                                 const std::vector<ParallelResult>& results);

}  // namespace gyre::app
