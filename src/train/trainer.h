// The built-in trainer behind `gyre train`: Fashion-MNIST on the mlp or the cnn, data-parallel
// over the ranks of gyre::init()'s world (or, with `plain`, a single process with no gyre at all,
// the reference loop the benchmarks compare with). gyre_train_worker is a command line over
// runTraining(); the options and their flags are declared in options.h; docs/training.md
// describes the flags and the output.
//
// This header is libtorch-free, so the worker's main compiles quickly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "train/options.h"  // TrainOptions, validateOptions
#include "train/stragglers.h"

namespace gyre::train {

// One checkpoint saved during an epoch (rank 0's figures).
struct CheckpointSave {
  std::int64_t step = 0;
  std::string path;
  std::uint64_t bytes = 0;
  double stallS = 0;  // time the training loop waited: the snapshot, plus a previous write's end
};

// What --autotune chose (DistributedOptimizer::autotuned()).
struct AutotuneRecord {
  double bucketCapMb = 0;
  std::string algorithm;
  double stepMs = 0;  // the chosen candidate's median step
  int trials = 0;
  int steps = 0;
  std::string summary;
};

// A pipeline's figures over an epoch's timed steps (--pp > 1).
struct PipelineReport {
  int pp = 1, dp = 1, microBatches = 1;
  std::string schedule;
  std::vector<int> balance;  // layers per stage
  // The share of a step a stage spent without compute (waiting for its neighbours, exchanging),
  // averaged over the ranks; and the schedule's formula for it (gyre::torch::idealBubble).
  double bubble = 0;
  double idealBubble = 0;
  // The bubble the measured stages alone make (free communication, the schedule's order): each
  // step's from its ranks' compute seconds (gyre::torch::stageTimesBubble), weighted by the
  // step. What the bubble exceeds it by is the exchanges and the wake-ups; what it exceeds
  // idealBubble by is unequal stages or cores. stageMs: each pipeline rank's compute
  // milliseconds per micro-batch (all its stages, forward and backward), averaged over the steps
  // and the replicas.
  double stageTimesBubble = 0;
  std::vector<double> stageMs;
  // The most activation bytes a rank held for its backward at once, the largest over the ranks.
  std::int64_t peakActivationBytes = 0;
};

// One epoch's figures, the same on every rank (averaged or summed across ranks).
struct EpochReport {
  int epoch = 0;  // from 1
  int epochs = 0;
  int world = 1;
  bool plain = false;
  std::string model;
  std::int64_t batch = 0;         // global
  std::int64_t perRankBatch = 0;  // batch / world
  double lr = 0;                  // after scaling (the warm-up's target)
  std::string compression;
  double loss = 0;                     // mean training loss over the epoch's steps and ranks
  std::optional<double> testAccuracy;  // fraction of the test set, unless eval is off
  double samplesPerS = 0;              // global samples of the timed steps / seconds
  double seconds = 0;                  // wall time of the timed steps
  std::int64_t steps = 0;              // steps run
  std::int64_t timedSteps = 0;         // steps in the throughput (steps - skipped)
  std::optional<double> speedup;       // samplesPerS / referenceSamplesPerS
  std::optional<double> efficiency;    // speedup / world
  // DistributedOptimizer's step timing over the timed steps, in seconds, averaged across ranks
  // (step_timing.h); plain: computeS is the whole time.
  double computeS = 0;
  double communicateS = 0;
  double waitS = 0;
  double hiddenS = 0;
  // The part of computeS the loop spent waiting for its batches (gyre::data::Loader::next()):
  // the step splits into dataWaitS + (computeS - dataWaitS) + waitS.
  double dataWaitS = 0;
  // Gradient bytes this worker put into the collectives per step (the payload: after fp16/bf16,
  // top-k or PowerSGD compression), averaged over the timed steps and the workers.
  double bytesPerStep = 0;
  // The workers named stragglers during the epoch (stragglers.h); nullopt when detection is off
  // (one worker, --straggler-threshold 0, a parameter-server mode).
  std::optional<std::vector<Straggler>> stragglers;
  // --backup-workers: the gradients left out during the epoch (one per worker that skipped a
  // step); nullopt when off.
  std::optional<std::int64_t> droppedGradients;
  // --autotune: what it chose (null until the tuning is done, and without it).
  std::optional<AutotuneRecord> autotune;
  int torchThreads = 0;
  std::optional<int> blasThreads;           // OPENBLAS_NUM_THREADS; unset: OpenBLAS's own default
  std::vector<CheckpointSave> checkpoints;  // saved during the epoch or right after its last step
  std::string mode = "allreduce";           // TrainOptions::mode
  // Parameter-server modes only: the servers, the epoch's updates by staleness (summed over the
  // workers; the last entry counts WorkerStats::kMaxStaleness and above) and the seconds a worker
  // was blocked in clock() (averaged over the workers).
  std::optional<int> servers;
  std::optional<std::vector<std::uint64_t>> staleness;
  std::optional<double> clockWaitS;
  std::optional<PipelineReport> pipeline;
  // Memory, the largest over the workers: the process's resident-set high-water mark (getrusage)
  // and the bytes of its training state as it holds them: the parameters it trains, their
  // gradients and the optimizer's state, sharded under --zero (null in a ps mode, where the
  // servers hold it).
  std::int64_t peakRssBytes = 0;
  std::optional<std::int64_t> modelStateBytes;
};

// Trains as `options` say and returns every epoch's report (a resumed run: the epochs it ran; an
// epoch cut short by stopAtStep has none). Rank 0 prints the progress bar (stderr), one line per
// epoch and one per checkpoint (stdout), and writes the run directory: config.json at the start,
// metrics.jsonl and steps.jsonl (each step's loss and rate) after every epoch (steps.jsonl also
// before each checkpoint), model.pt at the end, each through a temporary file and a rename; and
// progress.jsonl, appended as each step ends (step_log.h). `comm` null: plain mode (options.plain
// must be set).
// Throws InvalidArgument for options that do not fit this world, gyre::Error for missing data and unwritable
// files, and the communicator's errors.
std::vector<EpochReport> runTraining(const TrainOptions& options, std::shared_ptr<Communicator> comm);
// The same with gyre::init()'s world, or with none when options.plain.
std::vector<EpochReport> runTraining(const TrainOptions& options);

}  // namespace gyre::train
