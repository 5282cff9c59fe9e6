// The built-in trainer behind `gyre train`: Fashion-MNIST on the mlp or the cnn, data-parallel
// over the ranks of gyre::init()'s world (or, with `plain`, a single process with no gyre at all,
// the reference loop the benchmarks compare with). gyre_train_worker is a command line over
// runTraining(); docs/training.md describes the flags and the output.
//
// This header is libtorch-free, so the worker's main compiles quickly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::train {

struct TrainOptions {
  std::string model = "mlp";  // "mlp" or "cnn" (models.h)
  int epochs = 1;
  // The global batch: every step trains on `batch` samples in all, batch / world on each rank,
  // so one rank and W ranks see the same samples at every step (the batch must divide evenly).
  std::int64_t batch = 128;
  double lr = 0.05;  // SGD learning rate before scaling
  double momentum = 0.9;
  std::string compression = "none";  // gradients on the wire: none, fp16, bf16
  // How the rate grows with the world: none (the default: the global batch is fixed, so the
  // single-worker rate is right), linear or sqrt, for runs that grow the batch with the workers.
  std::string lrScaling = "none";
  // Linear warm-up over this many epochs (fractions allowed): from --lr to the scaled rate, or
  // from a tenth of the rate when it is not scaled.
  double warmupEpochs = 0;
  // After the warm-up: "constant", or "cosine" (down to zero at the end of the last epoch, which
  // settles the final accuracy instead of leaving it to the noise of a large step).
  std::string lrSchedule = "constant";
  std::uint64_t seed = 0;           // model initialisation and the samples' order
  std::string dataDir;              // empty: Debian's /usr/share/datasets/fashion-mnist
  std::string runDir;               // empty: write no files
  bool plain = false;               // no gyre: plain torch::optim::SGD in this one process
  std::int64_t maxSteps = 0;        // stop each epoch after this many steps; 0: the whole epoch
  std::int64_t skipSteps = 0;       // leave epoch 1's first steps out of the throughput (warm-up)
  bool eval = true;                 // test accuracy after each epoch
  int threads = 0;                  // libtorch intra-op threads; 0: GYRE_NUM_THREADS, else libtorch's
  double bucketCapMb = 25;          // DistributedOptimizer's bucket cap, MiB
  bool shardOptimizer = false;      // DistributedOptimizer's shardOptimizerState (ZeRO stage 1)
  bool json = false;                // also print each epoch's metrics as one JSON line on stdout
  std::string progress = "auto";    // the live progress bar: auto (when stderr is a terminal), on, off
  double referenceSamplesPerS = 0;  // one worker's throughput, for speedup/efficiency; 0: unknown
  // Checkpoints (docs/checkpoints.md): rank 0 saves into checkpointDir every checkpointEvery
  // global steps (0: only at the end) and at the end, keeping the keepLast newest. resume: start
  // from the newest valid checkpoint there (from scratch when there is none); without it, a
  // directory that holds a complete checkpoint is refused.
  std::string checkpointDir;
  std::int64_t checkpointEvery = 0;
  int keepLast = 3;
  bool resume = false;
  // Stop after this global step as if interrupted (the schedule still spans all epochs), saving a
  // checkpoint when checkpointDir is set; 0: run to the end.
  std::int64_t stopAtStep = 0;
  // The launcher's generation (GYRE_RESTART_COUNT; `gyre train --max-restarts`): 0 at first. It
  // goes into progress.jsonl and gates the fault below; the caller turns `resume` on for a restart.
  int restartCount = 0;
  // Fault injection for scripts/fault-injection.py (docs/fault-tolerance.md): in generation 0, rank
  // faultRank kills itself with SIGKILL right after global step faultAtStep (and its checkpoint,
  // when one is due), as a crash would. 0: never.
  std::int64_t faultAtStep = 0;
  int faultRank = 0;
  // Elastic training (`gyre train --elastic`, under `gyre run --elastic`; docs/elastic.md): the
  // world is whatever membership the launcher publishes, through gyre::elastic::run. The state
  // (model, optimizer, position in the data) is committed in memory every commitEvery global
  // steps; a lost worker costs the survivors the steps since. workerId is GYRE_ELASTIC_ID: the
  // fault above then names a worker id, not a rank. The global batch stays `batch` whatever the
  // world (each rank's loss is weighted by its share when the world does not divide it), so the
  // learning rate is unchanged unless lrScaling asks for it, re-applied at every membership.
  bool elastic = false;
  int workerId = -1;
  std::int64_t commitEvery = 10;
  // How the workers combine their gradients: "allreduce" (the DistributedOptimizer), or through
  // the parameter servers of `gyre run --servers S` (gyre::torch::PSOptimizer, docs/ps.md):
  // "ps:bsp", "ps:asp" or "ps:ssp:S". The servers apply SGD with `momentum` and the rate rule
  // above; each worker trains on its own DistributedSampler shard. Not with plain, elastic,
  // compression or checkpoints (yet).
  std::string mode = "allreduce";
  // Straggler injection, for benchmarks: rank stragglerRank sleeps (stragglerFactor - 1) times its
  // measured compute time (forward and backward) before each step's forward pass, so it runs
  // stragglerFactor times slower. -1: no straggler.
  int stragglerRank = -1;
  double stragglerFactor = 1;
  // Every evalEvery global steps (this rank's steps), rank 0 snapshots its model (a copy of the
  // parameters and buffers, nothing else: no worker waits for it in any mode) with the step and
  // the training time so far; after training it evaluates each snapshot's test accuracy alone and
  // writes eval.jsonl in the run directory, one {"step", "time_s", "test_acc"} per snapshot in step
  // order. time_s is the time since training started without the epochs' evaluations and the
  // snapshots' copies, for time-to-accuracy. Each snapshot holds a copy of the model until the
  // end. 0: never.
  std::int64_t evalEvery = 0;
};

// "allreduce": false; "ps:bsp", "ps:asp", "ps:ssp:S": true. Throws InvalidArgument naming --mode
// for anything else.
bool isParameterServerMode(const std::string& mode);

// One checkpoint saved during an epoch (rank 0's figures).
struct CheckpointSave {
  std::int64_t step = 0;
  std::string path;
  std::uint64_t bytes = 0;
  double stallS = 0;  // time the training loop waited: the snapshot, plus a previous write's end
};

// Throws InvalidArgument naming the flag for values no world could train with.
void validateOptions(const TrainOptions& options);

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
