// Every option of the built-in trainer, declared once: `gyre train`'s flags, gyre_train_worker's
// flags, the arguments `gyre train` hands its workers, their validation and their --help are all
// generated from the one table in options.cc. Adding a flag is one entry there (plus a field in
// TrainOptions and its use); docs/training.md describes them.
//
// libtorch-free: the gyre tool links it without the trainer.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/numbers.h"
#include "gyre/types.h"

namespace gyre::train {

// The most workers or servers one job may have: a guard against typos, not a limit of gyre.
inline constexpr double kMaxProcesses = 1 << 20;

struct TrainOptions {
  std::string model = "mlp";  // "mlp", "cnn" or "vit" (models.h)
  bool syncBn = false;        // the cnn with batch normalisation over the global batch (SyncBatchNorm)
  // The vit's shape: transformer blocks, token width, attention heads (they divide the width),
  // patch side in pixels (it divides 28).
  int vitDepth = 4;
  int vitWidth = 64;
  int vitHeads = 4;
  int vitPatch = 7;
  int epochs = 1;
  // The global batch: every step trains on `batch` samples in all, batch / world on each rank,
  // so one rank and W ranks see the same samples at every step (the batch must divide evenly).
  std::int64_t batch = 128;
  double lr = 0.05;  // learning rate before scaling
  // The update rule: sgd, adam, lars or lamb (optimizer_choice.h); momentum: sgd's and lars's.
  std::string optimizer = "sgd";
  double momentum = 0.9;
  double weightDecay = 0;
  std::string compression = "none";  // gradients on the wire: none, fp16, bf16, topk:R, powersgd:R
  // The buckets' allreduce: auto, ring, halving-doubling, tree, naive or hierarchical.
  std::string allreduce = "auto";
  // The forward pass's arithmetic: fp32, or bf16 (CPU autocast: convolutions and matrix products
  // in bfloat16, the weights, their gradients and the loss in float32).
  std::string precision = "fp32";
  // How the rate grows with the world: none (the default: the global batch is fixed, so the
  // single-worker rate is right), linear or sqrt, for runs that grow the batch with the workers.
  std::string lrScaling = "none";
  // Linear warm-up over this many epochs (fractions allowed): from --lr to the scaled rate, or
  // from a tenth of the rate when it is not scaled.
  double warmupEpochs = 0;
  // After the warm-up: "constant", or "cosine" (down to zero at the end of the last epoch, which
  // settles the final accuracy instead of leaving it to the noise of a large step).
  std::string lrSchedule = "constant";
  // Model parallelism (layout.h, docs/model-parallel.md): pp pipeline ranks per replica (1: the
  // whole model on every worker), dp replicas (0: the workers / pp), microBatches per step (0: 2 ·
  // pp), the schedule (gpipe, 1f1b, interleaved, zero-bubble), virtual stages per rank
  // (interleaved), how the layers are cut ("even", "time": by their measured time, or counts per
  // stage "3,2,1"), and recomputation of each stage's activations in its backward; tp ranks of a
  // tensor-parallel group split each transformer block of the vit (1: none).
  int pp = 1;
  int tp = 1;
  int dp = 0;
  int microBatches = 0;
  std::string schedule = "1f1b";
  int virtualStages = 1;
  std::string balance = "even";
  bool recompute = false;
  std::uint64_t seed = 0;           // model initialisation and the samples' order
  std::string dataDir;              // empty: Debian's /usr/share/datasets/fashion-mnist
  // A data set of the user's instead of Fashion-MNIST: image folders (DATA/train/CLASS/*.png and
  // DATA/test or DATA/val with the same classes), tables (DATA/train.csv and DATA/test.csv, or
  // .jsonl) or record shards (DATA/index.json, gyre data pack); the model's shape is taken from it.
  std::string data;
  std::string labelColumn = "label";  // --data's tables: the label's column
  std::int64_t skipBadRecords = 0;  // --data: images, rows or records that may be bad, left out and counted
  std::string resize;   // --data: "HxW", every image resized to it; empty: the images' own size
  // Random augmentations of each training batch, comma-separated: "flip" (left to right, p 0.5),
  // "crop:N" (pad by N, cut a window of the image's size at random). Empty: none.
  std::string augment;
  std::string runDir;               // empty: write no files
  bool plain = false;               // no gyre: plain torch::optim::SGD in this one process
  std::int64_t maxSteps = 0;        // stop each epoch after this many steps; 0: the whole epoch
  std::int64_t skipSteps = 0;       // leave epoch 1's first steps out of the throughput (warm-up)
  bool eval = true;                 // test accuracy after each epoch
  int threads = 0;                  // compute threads per worker; 0: GYRE_NUM_THREADS, else libtorch's
  int dataWorkers = 1;              // threads assembling batches ahead (gyre::data::Loader); 0: inline
  double bucketCapMb = static_cast<double>(kDefaultBucketCapBytes >> 20);  // DistributedOptimizer's, MiB
  bool shardOptimizer = false;      // DistributedOptimizer's shardOptimizerState (ZeRO stage 1)
  int zero = 0;                     // ZeRO stage: 1 as shardOptimizer, 2 also shardGradients, 3 FullyShardedModel
  std::int64_t memoryLimitMb = 0;   // each worker's RLIMIT_DATA, MiB; 0: unlimited
  bool json = false;                // also print each epoch's metrics as one JSON line on stdout
  int metricsPort = 0;              // rank 0 serves Prometheus metrics on this port; 0: off
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
  // Fault injection for scripts/fault-injection.py and the restart tests (docs/fault-tolerance.md):
  // in generation 0, rank faultRank kills itself with SIGKILL at faultPoint of global step
  // faultAtStep, as a crash would. 0: never. The points: "after-step" (right after the step, its
  // checkpoint, when one is due, possibly still being written); "before-step" (before the step,
  // 1: before the first); "after-checkpoint" (the step's checkpoint is complete on disk, the
  // epoch's evaluation and record not written yet when the step ends an epoch); "in-checkpoint"
  // (as if killed while writing it: the files are there, the manifest is not); "after-record"
  // (the step ends an epoch and its metrics.jsonl line is written). Except after-step, every
  // rank reaches the point before the fault rank dies and the others then wait for it, so what
  // is on disk is the same in every run.
  std::int64_t faultAtStep = 0;
  int faultRank = 0;
  std::string faultPoint = "after-step";
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
  // Fixed shards of each global batch (ElasticSampler::setShards), each a forward and backward
  // pass of its own, so that a step computes the same gradient in every world that divides
  // them: a lost worker changes the speed, not the trajectory. 0: gyre train sets it to --np
  // (a worker takes 0 as 1: each rank's share of the batch in one pass).
  int batchShards = 0;
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
  // Or, > 0: the straggler's process is confined to this many cores by a CPU quota in a cgroup
  // of its own (cpu_quota.h), as a slower machine would be, instead of sleeping.
  double stragglerCpu = 0;
  // Straggler detection (stragglers.h): a worker whose gradients are ready later than this many
  // times the others' median in 8 of 10 steps is named; 0: off.
  double stragglerThreshold = 1.5;
  // Backup workers (stragglers.h, BackupWorkers): each step, up to this many workers whose
  // recent step time is above stragglerThreshold times the others' median skip the forward and
  // backward pass, and the step averages the others' gradients; 0: off.
  int backupWorkers = 0;
  // Tune the bucket cap and the allreduce algorithm during the first steps
  // (DistributedOptimizerOptions::autotune); the choice is printed and kept in metrics.jsonl.
  bool autotune = false;
  // Every evalEvery global steps (this rank's steps), rank 0 snapshots its model (a copy of the
  // parameters and buffers, nothing else: no worker waits for it in any mode) with the step and
  // the training time so far; after training it evaluates each snapshot's test accuracy alone and
  // writes eval.jsonl in the run directory, one {"step", "time_s", "test_acc"} per snapshot in step
  // order. time_s is the time since training started without the epochs' evaluations and the
  // snapshots' copies, for time-to-accuracy. Each snapshot holds a copy of the model until the
  // end. 0: never.
  std::int64_t evalEvery = 0;

  // The job, for `gyre train` (the launcher) only; a worker ignores these.
  int np = 1;               // workers
  double timeoutS = 0;      // stop the job after this long; 0: never
  int maxRestarts = 0;      // restart mode: restarts of every worker; elastic: replacement workers
  int minNp = 1;            // --elastic: the fewest workers the job goes on with
  int maxNp = 0;            // --elastic: the most; 0: np
  double elasticTimeoutS = 600;
  std::string rdzv;  // --elastic --rdzv etcd://...: the job's state in etcd (gyre run --rdzv)
  int servers = -1;         // parameter servers of a ps mode; -1: not given (1 with a ps mode)
};

// Which program takes a flag: both (gyre train passes it on to its workers), only `gyre train`
// (the job: workers, restarts, elastic bounds), or only the worker (its plain loop).
enum class FlagScope : std::uint8_t { kBoth, kLauncher, kWorker };

// A numeric flag's lower bound, and how its message says it.
enum class Bound : std::uint8_t {
  kNone,
  kNonNegative,  // "must not be negative"
  kPositive,     // "must be positive"
  kAtLeast,      // "must be at least <min>"
  kRankOrNone,   // -1 or more: "must be a rank, or -1 for none"
};

struct TrainFlag {
  using Field = std::variant<bool TrainOptions::*, int TrainOptions::*, std::int64_t TrainOptions::*,
                             std::uint64_t TrainOptions::*, double TrainOptions::*, std::string TrainOptions::*>;
  std::string_view name;  // "--lr"
  Field field;
  std::string_view help;
  std::string_view group = {};  // the --help section; empty: the options at the top
  FlagScope scope = FlagScope::kBoth;
  Bound bound = Bound::kNone;
  double min = 0;                  // kAtLeast
  double max = numbers::kNoMax;    // every bound: the largest value accepted
  std::string_view choices = {};   // strings: "mlp|cnn"; empty: free text
  bool negated = false;            // a flag that sets its bool field to false (--no-eval)
  std::string_view needs = {};     // a flag this one is meaningless without ("--elastic")
  bool forwarded = true;           // kBoth: passed on to the workers as an argument
};

// The whole table, in --help order.
std::span<const TrainFlag> trainFlags();
// The flag called `name`; throws InvalidArgument for a name not in the table.
const TrainFlag& trainFlag(std::string_view name);

// Registers every flag of `scope` (and kBoth) on `app`, bound to `o`'s fields with their current
// values as defaults. -np is accepted for --np (the gyre tool rewrites it before parsing).
void addTrainFlags(CLI::App& app, TrainOptions& o, FlagScope scope);

// After parsing: throws InvalidArgument ("--min-np needs --elastic") for a flag given without the
// flag it needs, when `app` has both.
void checkGivenTogether(const CLI::App& app);

// The arguments that give a worker `o`'s values of every forwarded flag (strings when not empty,
// bool flags when they differ from the default).
std::vector<std::string> workerArguments(const TrainOptions& o);
// The shortest command line for `o`: the arguments of the flags whose value differs from
// TrainOptions{}'s, in the table's order. kWorker: what gyre_train_worker takes (its own flags
// and the forwarded ones); kLauncher: what `gyre train` takes (its own flags and the forwarded ones). How a
// program that starts training jobs (gyre bench) says what they do, without naming flags itself.
std::vector<std::string> changedArguments(const TrainOptions& o, FlagScope program);

// --resize's HEIGHTxWIDTH, or nullopt when it is not one (1 to 65536 each).
std::optional<std::pair<int, int>> parseResize(const std::string& text);
// --augment's stages in order: {"flip", 0} or {"crop", N}. Throws InvalidArgument naming a bad one.
struct AugmentStage {
  std::string name;
  int padding = 0;
};
std::vector<AugmentStage> parseAugment(const std::string& text);

// Throws InvalidArgument, with the same message whichever program was given the flag, when a
// flag's value is out of its bound or not one of its choices, or when flags that cannot go
// together are combined. The checks that need the number of workers are checkWorld's.
void validateOptions(const TrainOptions& o);
// The checks that need the world: the launcher's --np, a worker's world size (the same messages).
void checkWorld(const TrainOptions& o, int world);

// "allreduce": false; "ps:bsp", "ps:asp", "ps:ssp:S": true. Throws InvalidArgument naming --mode
// for anything else.
bool isParameterServerMode(const std::string& mode);

// The ZeRO stage asked for: --zero, or 1 for --shard-optimizer, else 0.
inline int zeroStage(const TrainOptions& o) { return o.zero > 0 ? o.zero : o.shardOptimizer ? 1 : 0; }

}  // namespace gyre::train
