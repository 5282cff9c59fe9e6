#include "train/options.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/check.h"
#include "common/compression_spec.h"
#include "common/numbers.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "train/layout.h"

namespace gyre::train {
namespace {

using O = TrainOptions;
constexpr FlagScope kLauncher = FlagScope::kLauncher;
constexpr FlagScope kWorker = FlagScope::kWorker;

constexpr double kMaxProcesses = 1 << 20;  // workers or servers of one job
constexpr std::string_view kElastic = "Elastic training (docs/elastic.md)";
constexpr std::string_view kParameterServers = "Parameter servers (docs/ps.md)";
constexpr std::string_view kCheckpoints = "Checkpoints and restarts (docs/checkpoints.md)";
constexpr std::string_view kBenchmarking = "Benchmarking";
constexpr std::string_view kModelParallel = "Model parallelism (docs/model-parallel.md)";
constexpr std::string_view kFaults = "Fault injection (testing; see docs/fault-tolerance.md)";

// The table. --help lists the flags in this order, each under its group.
const std::array kFlags = std::to_array<TrainFlag>({
    {.name = "--model", .field = &O::model, .help = "The model to train", .choices = "mlp|cnn|vit"},
    {.name = "--vit-depth",
     .field = &O::vitDepth,
     .help = "The vit's transformer blocks",
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 64},
    {.name = "--vit-width",
     .field = &O::vitWidth,
     .help = "The vit's token width (a multiple of --vit-heads)",
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 4096},
    {.name = "--vit-heads",
     .field = &O::vitHeads,
     .help = "The vit's attention heads",
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 256},
    {.name = "--vit-patch",
     .field = &O::vitPatch,
     .help = "The vit's patch side in pixels (1, 2, 4, 7, 14 or 28: it divides the 28-pixel images)",
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 28},
    {.name = "--sync-bn",
     .field = &O::syncBn,
     .help = "The cnn with batch normalisation after each convolution, its statistics taken over the global "
             "batch (every worker's samples: SyncBatchNorm)"},
    {.name = "--np",
     .field = &O::np,
     .help = "Number of workers (also -np)",
     .scope = kLauncher,
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = kMaxProcesses},
    {.name = "--epochs",
     .field = &O::epochs,
     .help = "Passes over the 60,000 training images",
     .bound = Bound::kAtLeast,
     .min = 1},
    {.name = "--batch",
     .field = &O::batch,
     .help = "Global batch: samples per step over all workers (a multiple of --np)",
     .bound = Bound::kAtLeast,
     .min = 1},
    {.name = "--lr",
     .field = &O::lr,
     .help = "Learning rate; right as it is for any --np, since the global batch is fixed",
     .bound = Bound::kPositive},
    {.name = "--optimizer",
     .field = &O::optimizer,
     .help = "The update rule: sgd, adam, lars (SGD with a layer-wise trust ratio) or lamb (Adam with it); "
             "the last two for large batches",
     .choices = "sgd|adam|lars|lamb"},
    {.name = "--momentum",
     .field = &O::momentum,
     .help = "Momentum of sgd and lars",
     .bound = Bound::kNonNegative},
    {.name = "--weight-decay",
     .field = &O::weightDecay,
     .help = "L2 weight decay (lars and lamb: matrices and kernels only, not biases)",
     .bound = Bound::kNonNegative},
    {.name = "--precision",
     .field = &O::precision,
     .help =
         "Forward-pass arithmetic: fp32, or bf16 (autocast: convolutions and matrix products in bfloat16; "
         "weights, gradients and loss stay float32)",
     .choices = "fp32|bf16"},
    {.name = "--compression",
     .field = &O::compression,
     .help = "Gradients on the wire: none, fp16 or bf16 (half the bytes), topk:RATIO (the RATIO share of the "
             "largest entries, e.g. topk:0.01) or powersgd:RANK (a rank-RANK approximation of each weight "
             "matrix, e.g. powersgd:4); the last two keep what they leave out for the next step"},
    {.name = "--allreduce",
     .field = &O::allreduce,
     .help = "The gradient buckets' allreduce algorithm: auto (the cost model's choice; hierarchical when "
             "workers share hosts across several), ring, halving-doubling, tree, naive or hierarchical",
     .choices = "auto|ring|halving-doubling|tree|naive|hierarchical"},
    {.name = "--lr-scaling",
     .field = &O::lrScaling,
     .help = "Multiply --lr by 1 (none), by N (linear) or by sqrt(N): for a batch that grows with N",
     .choices = "none|linear|sqrt"},
    {.name = "--warmup-epochs",
     .field = &O::warmupEpochs,
     .help = "Raise the learning rate linearly over this many epochs",
     .bound = Bound::kNonNegative},
    {.name = "--lr-schedule",
     .field = &O::lrSchedule,
     .help = "After the warm-up: constant, or cosine (down to zero at the end of the last epoch)",
     .choices = "constant|cosine"},
    {.name = "--seed", .field = &O::seed, .help = "Seed of the initial weights and the samples' order"},
    {.name = "--data-dir",
     .field = &O::dataDir,
     .help =
         "Fashion-MNIST's IDX files, gzip-compressed or not (default: /usr/share/datasets/fashion-mnist)"},
    {.name = "--run-dir",
     .field = &O::runDir,
     .help = "Where to write the run's files (gyre train's default: runs/MODEL-npN-TIME)"},
    {.name = "--threads",
     .field = &O::threads,
     .help = "Compute threads per worker (default: cores / N under gyre train; a worker alone: "
             "GYRE_NUM_THREADS, else libtorch's default)",
     .bound = Bound::kNonNegative,
     .forwarded = false},  // gyre run hands it to each worker as GYRE_NUM_THREADS
    {.name = "--memory-limit-mb",
     .field = &O::memoryLimitMb,
     .help = "Limit each worker's data memory (RLIMIT_DATA: heap and private mappings) to this many MiB; a "
             "worker that needs more stops with an out-of-memory error (0: no limit)",
     .bound = Bound::kNonNegative,
     .max = std::int64_t{1} << 40},
    {.name = "--data-workers",
     .field = &O::dataWorkers,
     .help =
         "Threads per worker assembling the next batches ahead of the training loop (0: the loop assembles "
         "each batch itself)",
     .bound = Bound::kNonNegative},
    {.name = "--max-steps",
     .field = &O::maxSteps,
     .help = "Stop each epoch after this many steps (0: the whole epoch)",
     .bound = Bound::kNonNegative},
    {.name = "--skip-steps",
     .field = &O::skipSteps,
     .help = "Leave epoch 1's first steps out of samples/s (warm-up)",
     .bound = Bound::kNonNegative},
    {.name = "--no-eval",
     .field = &O::eval,
     .help = "Skip the test accuracy after each epoch",
     .negated = true},
    {.name = "--bucket-cap-mb",
     .field = &O::bucketCapMb,
     .help = "Gradients allreduced together, in MiB",
     .bound = Bound::kPositive,
     .max = 1 << 20},
    {.name = "--autotune",
     .field = &O::autotune,
     .help =
         "Tune --bucket-cap-mb and the allreduce algorithm during the first steps (5 steps per candidate: "
         "caps of 1, 4, 16 and 64 MiB with --allreduce, then auto, ring and halving-doubling); the choice "
         "is printed and kept in metrics.jsonl (autotune)"},
    {.name = "--shard-optimizer",
     .field = &O::shardOptimizer,
     .help = "Shard the optimizer step and its state across the workers (ZeRO stage 1): reduce-scatter, "
             "step 1/N of the parameters, allgather (the same as --zero 1)"},
    {.name = "--json", .field = &O::json, .help = "Also print each epoch's metrics as one JSON line"},
    {.name = "--metrics-port",
     .field = &O::metricsPort,
     .help = "Serve live metrics for Prometheus (GET /metrics) from worker 0 on this port, all interfaces: "
             "samples/s, the step split, per-rank step times, collectives' bytes by algorithm, checkpoints, "
             "staleness (0: off; docs/metrics.md)",
     .bound = Bound::kNonNegative,
     .max = 65535},
    {.name = "--progress",
     .field = &O::progress,
     .help = "Live progress bar: auto (on a terminal), on or off",
     .choices = "auto|on|off"},
    {.name = "--reference-samples-per-s",
     .field = &O::referenceSamplesPerS,
     .help =
         "One worker's samples/s for speedup and efficiency (gyre train's default: found in earlier runs)",
     .bound = Bound::kNonNegative},
    {.name = "--plain",
     .field = &O::plain,
     .help = "No gyre: a plain single-process libtorch loop (the benchmarks' reference)",
     .scope = kWorker},
    {.name = "--timeout",
     .field = &O::timeoutS,
     .help = "Stop the job after this many seconds (0: never)",
     .scope = kLauncher,
     .bound = Bound::kNonNegative,
     .max = numbers::kMaxSeconds},
    {.name = "--checkpoint-dir",
     .field = &O::checkpointDir,
     .help = "Save checkpoints here (worker 0), each in D/ckpt-STEP with a verified manifest",
     .group = kCheckpoints},
    {.name = "--checkpoint-every",
     .field = &O::checkpointEvery,
     .help = "Save a checkpoint every N global steps, and at the end (0: only at the end)",
     .group = kCheckpoints,
     .bound = Bound::kNonNegative},
    {.name = "--keep-last",
     .field = &O::keepLast,
     .help = "Checkpoints kept in --checkpoint-dir; older ones are deleted",
     .group = kCheckpoints,
     .bound = Bound::kAtLeast,
     .min = 1},
    {.name = "--resume",
     .field = &O::resume,
     .help = "Continue from the newest valid checkpoint in --checkpoint-dir (from scratch if none); a --pp "
             "checkpoint also on another layout without --tp and --zero",
     .group = kCheckpoints},
    {.name = "--stop-at-step",
     .field = &O::stopAtStep,
     .help = "Stop after this global step as if interrupted, saving a checkpoint (0: never)",
     .group = kCheckpoints,
     .bound = Bound::kNonNegative},
    {.name = "--max-restarts",
     .field = &O::maxRestarts,
     .help = "After a worker fails, restart every worker from the newest checkpoint, at most this many "
             "times (needs --checkpoint-dir); with --elastic, the most replacement workers started",
     .group = kCheckpoints,
     .scope = kLauncher,
     .bound = Bound::kNonNegative},
    {.name = "--elastic",
     .field = &O::elastic,
     .help = "Survive lost workers without restarting: the others roll back to their last commit and go on "
             "(gyre run --elastic)",
     .group = kElastic,
     .scope = kLauncher},
    {.name = "--min-np",
     .field = &O::minNp,
     .help = "The fewest workers the job goes on with; below, it waits up to --elastic-timeout for more",
     .group = kElastic,
     .scope = kLauncher,
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = kMaxProcesses,
     .needs = "--elastic"},
    {.name = "--max-np",
     .field = &O::maxNp,
     .help = "The most workers the job grows to (0: --np)",
     .group = kElastic,
     .scope = kLauncher,
     .bound = Bound::kNonNegative,
     .max = kMaxProcesses,
     .needs = "--elastic"},
    {.name = "--elastic-timeout",
     .field = &O::elasticTimeoutS,
     .help = "Seconds the job may stay below --min-np before it gives up",
     .group = kElastic,
     .scope = kLauncher,
     .bound = Bound::kPositive,
     .max = numbers::kMaxSeconds,
     .needs = "--elastic"},
    {.name = "--rdzv",
     .field = &O::rdzv,
     .help = "Keep the elastic job's state in etcd, etcd://host:port[,host:port...]/JOB, so it survives the "
             "loss of any host: run the same gyre train on every host, --np being its workers, with "
             "--min-np and --max-np for the whole job (gyre run --rdzv)",
     .group = kElastic,
     .scope = kLauncher,
     .needs = "--elastic"},
    {.name = "--commit-every",
     .field = &O::commitEvery,
     .help = "Commit the training state in memory every N global steps: a lost worker costs the others at "
             "most N steps",
     .group = kElastic,
     .bound = Bound::kAtLeast,
     .min = 1,
     .needs = "--elastic"},
    {.name = "--mode",
     .field = &O::mode,
     .help = "How gradients meet: allreduce, or through parameter servers: ps:bsp (synchronous), ps:asp "
             "(asynchronous) or ps:ssp:S (at most S steps apart)",
     .group = kParameterServers},
    {.name = "--servers",
     .field = &O::servers,
     .help = "Parameter server processes for a ps --mode (default 1)",
     .group = kParameterServers,
     .scope = kLauncher},
    {.name = "--straggler-rank",
     .field = &O::stragglerRank,
     .help = "This rank runs --straggler-factor times slower: it sleeps that much longer than it computes "
             "(-1: none)",
     .group = kBenchmarking,
     .bound = Bound::kRankOrNone},
    {.name = "--straggler-factor",
     .field = &O::stragglerFactor,
     .help = "How many times slower the straggler runs",
     .group = kBenchmarking,
     .bound = Bound::kAtLeast,
     .min = 1},
    {.name = "--straggler-threshold",
     .field = &O::stragglerThreshold,
     .help = "Name a worker whose gradients are ready later than this many times the other workers' median "
             "in 8 of 10 steps: in the output, metrics.jsonl (stragglers) and the timeline (0: off)",
     .bound = Bound::kNonNegative},
    {.name = "--backup-workers",
     .field = &O::backupWorkers,
     .help = "Each step, up to this many workers slower than --straggler-threshold times the others' median "
             "skip their computation and the step goes on with the others' gradients, averaged (backup "
             "workers; a skipping worker computes every 10th step to be measured again; 0: off)",
     .bound = Bound::kNonNegative},
    {.name = "--eval-every",
     .field = &O::evalEvery,
     .help = "Worker 0 snapshots its model every N steps and, after training, writes each snapshot's test "
             "accuracy and training time to eval.jsonl (0: never), for time-to-accuracy",
     .group = kBenchmarking,
     .bound = Bound::kNonNegative},
    {.name = "--pp",
     .field = &O::pp,
     .help = "Pipeline parallelism: cut the model into this many stages, one per worker, each replica of "
             "the model spread over --pp neighbouring workers (--np / --pp replicas)",
     .group = kModelParallel,
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 1024},
    {.name = "--tp",
     .field = &O::tp,
     .help = "Tensor parallelism: split each transformer block of the vit (its attention heads and its MLP) "
             "across this many neighbouring workers, which compute every sample together (--np / --tp "
             "replicas)",
     .group = kModelParallel,
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 1024},
    {.name = "--dp",
     .field = &O::dp,
     .help = "Data-parallel replicas (0: --np / (--pp × --tp)); given, it must be that",
     .group = kModelParallel,
     .bound = Bound::kNonNegative,
     .max = kMaxProcesses},
    {.name = "--micro-batches",
     .field = &O::microBatches,
     .help = "Micro-batches each replica's batch is cut into for the pipeline (0: 2 × --pp)",
     .group = kModelParallel,
     .bound = Bound::kNonNegative,
     .max = 1 << 16},
    {.name = "--schedule",
     .field = &O::schedule,
     .help = "The pipeline's order of forwards and backwards: gpipe (all forwards first), 1f1b (fewer "
             "activations held), zero-bubble (weight gradients fill the idle time) or interleaved (--virtual-stages "
             "stages per worker: a smaller bubble)",
     .group = kModelParallel,
     .choices = "gpipe|1f1b|interleaved|zero-bubble"},
    {.name = "--virtual-stages",
     .field = &O::virtualStages,
     .help = "Stages per pipeline worker for --schedule interleaved",
     .group = kModelParallel,
     .bound = Bound::kAtLeast,
     .min = 1,
     .max = 64},
    {.name = "--balance",
     .field = &O::balance,
     .help = "How the layers are cut into stages: even (equal counts), time (equal measured time) or the "
             "layers of each stage, e.g. 3,2,1",
     .group = kModelParallel},
    {.name = "--recompute",
     .field = &O::recompute,
     .help = "Keep only each stage's input per micro-batch and run its forward again in the backward "
             "(activation memory for compute)",
     .group = kModelParallel},
    {.name = "--zero",
     .field = &O::zero,
     .help = "Shard the training state across the data-parallel workers: 1 the optimizer's state and step "
             "(as --shard-optimizer), 2 also the gradients (each worker keeps its part once reduced), 3 also "
             "the parameters (each layer's gathered just before its forward and backward and freed after, as "
             "FSDP); 0: none",
     .group = kModelParallel,
     .bound = Bound::kNonNegative,
     .max = 3},
    {.name = "--fault-at-step",
     .field = &O::faultAtStep,
     .help = "In the first generation, rank --fault-rank (elastic: worker id) kills itself with SIGKILL "
             "right after this global step (0: never)",
     .group = kFaults,
     .bound = Bound::kNonNegative},
    {.name = "--fault-rank",
     .field = &O::faultRank,
     .help = "The rank (elastic: the worker id) --fault-at-step kills",
     .group = kFaults,
     .bound = Bound::kNonNegative},
    {.name = "--fault-point",
     .field = &O::faultPoint,
     .help = "Where in step --fault-at-step the fault strikes: after it, before it, after its checkpoint is "
             "complete, while its checkpoint is written, or after its epoch's metrics.jsonl line",
     .group = kFaults,
     .choices = "after-step|before-step|after-checkpoint|in-checkpoint|after-record"},
});

std::vector<std::string_view> split(std::string_view choices) {
  std::vector<std::string_view> out;
  while (!choices.empty()) {
    const auto bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    choices = bar == std::string_view::npos ? std::string_view() : choices.substr(bar + 1);
  }
  return out;
}

// "a, b or c".
std::string spoken(std::string_view choices) {
  const std::vector<std::string_view> parts = split(choices);
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " or " : ", ";
    out += parts[i];
  }
  return out;
}

using numbers::format;  // the shortest text that reads back as the number

template <typename T>
std::string text(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, double>) {
    return format(value);
  } else {
    return std::to_string(value);
  }
}

// The flag's bound, checked on a number: finite (doubles) and inside [lower, f.max].
template <typename T>
void checkBound(const TrainFlag& f, T value) {
  double lower = 0;
  bool exclusive = false;
  std::string_view note;
  switch (f.bound) {
    case Bound::kNone:
      return;
    case Bound::kNonNegative:
      break;
    case Bound::kPositive:
      exclusive = true;
      break;
    case Bound::kAtLeast:
      lower = f.min;
      break;
    case Bound::kRankOrNone:
      lower = -1;
      note = "-1: none";
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    const auto min = static_cast<std::int64_t>(exclusive ? lower + 1 : lower);
    numbers::checkInt(f.name, static_cast<std::int64_t>(value), min, static_cast<std::int64_t>(f.max), note);
  } else {
    numbers::check(f.name, value, {.min = lower, .max = f.max, .minExclusive = exclusive, .note = note});
  }
}

// CLI11 reads an integer too large for its field as the field's largest value; this refuses it.
template <typename T>
CLI::Validator fitsIn() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        T parsed{};
        const auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), parsed);
        if (ec != std::errc::result_out_of_range) return {};  // other mistakes: CLI11's own message
        return input + " is out of range: integers from " +
               std::to_string(std::numeric_limits<T>::min()) + " to " + std::to_string(std::numeric_limits<T>::max());
      },
      "", "");
}

void checkFlag(const TrainFlag& f, const TrainOptions& o) {
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        const T& value = o.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          if (f.choices.empty()) return;
          const std::vector<std::string_view> choices = split(f.choices);
          GYRE_USAGE_CHECK(std::find(choices.begin(), choices.end(), value) != choices.end(), f.name, " '", value,
                           "': expected ", spoken(f.choices));
        } else if constexpr (!std::is_same_v<T, bool>) {
          checkBound(f, value);
        }
      },
      f.field);
}

// The --elastic combinations: the state lives in memory, so the checkpoint flags do not apply.
void checkElastic(const TrainOptions& o) {
  for (const auto& [given, flag] : {std::pair{!o.checkpointDir.empty(), "--checkpoint-dir"},
                                    std::pair{o.resume, "--resume"}, std::pair{o.stopAtStep > 0, "--stop-at-step"}})
    GYRE_USAGE_CHECK(!given, "--elastic keeps its state in memory (a commit every --commit-every steps): ", flag,
                     " belongs to restart mode and cannot be combined with it yet");
  GYRE_USAGE_CHECK(!o.plain, "--elastic trains through gyre: --plain does not apply");
}

// A ps mode keeps the model on the servers; the features that keep it in the workers
// (checkpoints, elastic worlds) or change what travels (compression) do not apply yet.
void checkParameterServerMode(const TrainOptions& o) {
  GYRE_USAGE_CHECK(!o.plain, "--mode ", o.mode, " trains through parameter servers: --plain does not apply");
  GYRE_USAGE_CHECK(!o.elastic, "--mode ", o.mode, " cannot be combined with --elastic yet");
  GYRE_USAGE_CHECK(o.checkpointDir.empty() && !o.resume, "--mode ", o.mode,
                   " keeps the parameters on the servers: checkpoints (--checkpoint-dir, --resume) are not supported "
                   "with it yet");
  GYRE_USAGE_CHECK(o.compression == "none", "--mode ", o.mode, " pushes float32 gradients: --compression ",
                   o.compression, " does not apply");
  GYRE_USAGE_CHECK(o.optimizer == "sgd" && o.weightDecay == 0, "--mode ", o.mode,
                   " updates the parameters on the servers with SGD and --momentum: --optimizer ",
                   o.optimizer, o.weightDecay != 0 ? " and --weight-decay" : "", " do not apply");
}

// --shard-optimizer, --zero 1 and --zero 3.
void checkShardOptimizer(const TrainOptions& o) {
  const std::string flag = o.zero > 0 ? "--zero " + std::to_string(o.zero) : "--shard-optimizer";
  GYRE_USAGE_CHECK(!o.shardOptimizer || o.zero <= 1, "--shard-optimizer is --zero 1: it does not go with ", flag);
  GYRE_USAGE_CHECK(!o.plain && !o.elastic && !isParameterServerMode(o.mode), flag,
                   " shards the data-parallel optimizer step: it does not apply with --plain, "
                   "--elastic or --mode ",
                   o.mode);
  GYRE_USAGE_CHECK(o.compression == "none", flag, " reduce-scatters float32 gradients: --compression ",
                   o.compression, " does not apply");
  GYRE_USAGE_CHECK(o.optimizer == "sgd" || o.optimizer == "adam", flag,
                   " splits the optimizer step "
                   "elementwise: --optimizer ",
                   o.optimizer, " takes the norm of whole layers (use sgd or adam)");
  if (o.zero < 3) return;
  GYRE_USAGE_CHECK(!o.syncBn && o.backupWorkers == 0, flag, " gathers each layer's parameters in the forward "
                   "pass, with every worker: --sync-bn and --backup-workers are not supported with it yet");
  GYRE_USAGE_CHECK(o.evalEvery == 0, flag, " keeps only a shard of the parameters on each worker: --eval-every "
                   "(snapshots of the whole model) is not supported with it yet");
}

}  // namespace

std::span<const TrainFlag> trainFlags() {
  return kFlags;
}

const TrainFlag& trainFlag(std::string_view name) {
  for (const TrainFlag& f : kFlags)
    if (f.name == name) return f;
  GYRE_THROW(InvalidArgument, "unknown training flag ", name);
}

void addTrainFlags(CLI::App& app, TrainOptions& o, FlagScope scope) {
  for (const TrainFlag& f : kFlags) {
    if (f.scope != FlagScope::kBoth && f.scope != scope) continue;
    const std::string name(f.name);
    const std::string help(f.help);
    CLI::Option* option = std::visit(
        [&](auto member) -> CLI::Option* {
          using T = std::remove_cvref_t<decltype(o.*member)>;
          T& value = o.*member;
          if constexpr (std::is_same_v<T, bool>) {
            if (f.negated) return app.add_flag_callback(name, [&value] { value = false; }, help);
            return app.add_flag(name, value, help);
          } else {
            CLI::Option* added = app.add_option(name, value, help);
            if constexpr (std::is_same_v<T, std::string>) {
              if (!value.empty()) added->default_str(value);
              if (!f.choices.empty()) added->type_name("{" + spoken(f.choices) + "}");
            } else {
              added->default_str(text(value));
              if constexpr (std::is_integral_v<T>) added->check(fitsIn<T>());
            }
            return added;
          }
        },
        f.field);
    if (!f.group.empty()) option->group(std::string(f.group));
  }
}

void checkGivenTogether(const CLI::App& app) {
  for (const TrainFlag& f : kFlags) {
    if (f.needs.empty()) continue;
    const CLI::Option* given = app.get_option_no_throw(std::string(f.name));
    const CLI::Option* needed = app.get_option_no_throw(std::string(f.needs));
    if (given == nullptr || needed == nullptr) continue;  // not flags of this program
    GYRE_USAGE_CHECK(given->count() == 0 || needed->count() > 0, f.name, " needs ", f.needs);
  }
}

std::vector<std::string> workerArguments(const TrainOptions& o) {
  std::vector<std::string> argv;
  for (const TrainFlag& f : kFlags) {
    if (f.scope != FlagScope::kBoth || !f.forwarded) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(o.*member)>;
          const T& value = o.*member;
          if constexpr (std::is_same_v<T, bool>) {
            if (value != f.negated) argv.emplace_back(f.name);
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (!value.empty()) argv.insert(argv.end(), {std::string(f.name), value});
          } else {
            argv.insert(argv.end(), {std::string(f.name), text(value)});
          }
        },
        f.field);
  }
  return argv;
}

void validateOptions(const TrainOptions& o) {
  for (const TrainFlag& f : kFlags) checkFlag(f, o);
  const bool ps = isParameterServerMode(o.mode);
  GYRE_USAGE_CHECK(o.restartCount >= 0, "GYRE_RESTART_COUNT must not be negative (got ", o.restartCount, ")");
  GYRE_USAGE_CHECK(o.maxSteps == 0 || o.skipSteps < o.maxSteps, "--skip-steps ", o.skipSteps,
                   " leaves none of the --max-steps ", o.maxSteps, " to time");
  GYRE_USAGE_CHECK(o.checkpointEvery == 0 || !o.checkpointDir.empty(),
                   "--checkpoint-every needs --checkpoint-dir (where to save)");
  GYRE_USAGE_CHECK(!o.resume || !o.checkpointDir.empty(), "--resume needs --checkpoint-dir (where to resume from)");
  GYRE_USAGE_CHECK(!o.plain || o.compression == "none", "--plain trains without gyre: --compression does not apply");
  GYRE_USAGE_CHECK(!o.plain || o.precision == "fp32",
                   "--plain is the fp32 libtorch reference loop: --precision ", o.precision,
                   " does not apply");
  GYRE_USAGE_CHECK(o.momentum < 1, "--momentum must be below 1 (got ", numbers::format(o.momentum), ")");
  GYRE_USAGE_CHECK(o.faultPoint == "after-step" || !o.elastic, "--fault-point ", o.faultPoint,
                   " is for restart mode; --elastic faults strike after a step");
  GYRE_USAGE_CHECK(o.faultPoint.find("checkpoint") == std::string::npos || !o.checkpointDir.empty(),
                   "--fault-point ", o.faultPoint, " needs --checkpoint-dir");
  GYRE_USAGE_CHECK(
      !o.syncBn || (o.model == "cnn" && !o.plain && !ps),
      "--sync-bn adds batch normalisation to the cnn, its statistics shared by the data-parallel "
      "workers: it needs --model cnn, and not --plain or a parameter-server --mode");
  const TrainOptions defaults;
  GYRE_USAGE_CHECK(o.model == "vit" || (o.vitDepth == defaults.vitDepth && o.vitWidth == defaults.vitWidth &&
                                        o.vitHeads == defaults.vitHeads && o.vitPatch == defaults.vitPatch),
                   "--vit-depth, --vit-width, --vit-heads and --vit-patch shape --model vit, not ", o.model);
  GYRE_USAGE_CHECK(o.vitWidth % o.vitHeads == 0, "--vit-heads ", o.vitHeads, " does not divide --vit-width ",
                   o.vitWidth);
  GYRE_USAGE_CHECK(28 % o.vitPatch == 0, "--vit-patch ", o.vitPatch,
                   " does not divide the 28-pixel images (1, 2, 4, 7, 14 or 28)");
  const std::string compression = parseCompressionSpec(o.compression, "--compression").kind;
  const bool lossy = compression == "topk" || compression == "powersgd";
  GYRE_USAGE_CHECK(o.stragglerThreshold == 0 || o.stragglerThreshold > 1,
                   "--straggler-threshold must be above 1, "
                   "or 0 for no straggler detection (got ",
                   numbers::format(o.stragglerThreshold), ")");
  GYRE_USAGE_CHECK(o.backupWorkers == 0 || o.stragglerThreshold > 0,
                   "--backup-workers needs --straggler-threshold above 1: it decides which workers are slow");
  GYRE_USAGE_CHECK(o.backupWorkers == 0 || (!ps && !o.plain && !o.elastic && !o.syncBn),
                   "--backup-workers is for the allreduce --mode, without --plain, --elastic or --sync-bn "
                   "(a worker that skips its forward pass would leave SyncBatchNorm's allreduces waiting)");
  GYRE_USAGE_CHECK(
      !o.autotune || (!ps && !o.plain && zeroStage(o) == 0),
      "--autotune tunes the data-parallel gradient buckets: not with --plain, a parameter-server "
      "--mode or --shard-optimizer / --zero (whose buckets never move)");
  GYRE_USAGE_CHECK(
      o.allreduce == "auto" || (!ps && !o.plain && zeroStage(o) == 0 && !lossy), "--allreduce ", o.allreduce,
      " picks the gradient buckets' allreduce: it does not apply with --plain, a parameter-server "
      "--mode, --shard-optimizer / --zero (a reduce-scatter) or --compression topk/powersgd (their own "
      "collectives)");
  GYRE_USAGE_CHECK(!o.autotune || !lossy, "--autotune tunes the gradient buckets, which --compression ",
                   o.compression, " does not use (it reduces every gradient at once)");
  if (o.elastic) checkElastic(o);
  if (ps) checkParameterServerMode(o);
  if (zeroStage(o) > 0) checkShardOptimizer(o);
  checkModelParallel(o);
  // The job's own flags (gyre train's; a worker has their defaults).
  GYRE_USAGE_CHECK(o.servers < 0 || ps, "--servers ", o.servers,
                   " needs a parameter-server --mode (ps:bsp, ps:asp or ps:ssp:S)");
  // -1 inside: not given (1 with a ps mode).
  if (o.servers >= 0) numbers::checkInt("--servers", o.servers, 1, static_cast<std::int64_t>(kMaxProcesses));
  GYRE_USAGE_CHECK(o.maxRestarts == 0 || o.elastic || !o.checkpointDir.empty(), "--max-restarts ", o.maxRestarts,
                   " needs --checkpoint-dir: a restarted generation resumes from the newest checkpoint there, and "
                   "without checkpoints it would start training over (or use --elastic, where it counts "
                   "replacement workers)");
  if (o.elastic) {
    const int maxNp = o.maxNp > 0 ? o.maxNp : o.np;
    GYRE_USAGE_CHECK(o.minNp <= o.np && o.np <= maxNp, "--np ", o.np, " is outside --min-np ", o.minNp,
                     " .. --max-np ", maxNp);
    GYRE_USAGE_CHECK(o.batch >= maxNp, "--batch ", o.batch,
                     " is the global batch: it needs at least one sample for each of --max-np ", maxNp, " workers");
  }
}

void checkWorld(const TrainOptions& o, int world) {
  // Elastic worlds need not divide the batch (each rank's loss is weighted by its share), and the
  // fault names a worker id, not a rank.
  const bool split = o.pp > 1 || o.tp > 1;
  if (split) checkLayout(o, world);  // the batch divides among the replicas
  GYRE_USAGE_CHECK(o.elastic || split || o.batch % world == 0, "--batch ", o.batch,
                   " is the global batch and must divide evenly among the ", world, " workers: choose a multiple of ",
                   world);
  GYRE_USAGE_CHECK(o.stragglerRank < world, "--straggler-rank ", o.stragglerRank, " is not a rank of the ", world,
                   " workers (0 to ", world - 1, ", or -1 for none)");
  GYRE_USAGE_CHECK(o.backupWorkers < world, "--backup-workers ", o.backupWorkers, " must be fewer than the ",
                   world, " workers: the step needs at least one gradient");
  GYRE_USAGE_CHECK(o.faultAtStep == 0 || o.faultRank < world, "--fault-rank ", o.faultRank, " is not a ",
                   o.elastic ? "worker id" : "rank", " of the ", world, " workers (0 to ", world - 1, ")");
}

bool isParameterServerMode(const std::string& mode) {
  if (mode == "allreduce") return false;
  GYRE_USAGE_CHECK(mode.rfind("ps:", 0) == 0, "--mode '", mode,
                   "': allreduce, or a parameter-server mode: ps:bsp, ps:asp or ps:ssp:S");
  try {
    ps::Mode::parse(mode.substr(3));
  } catch (const InvalidArgument&) {
    GYRE_USAGE_CHECK(false, "--mode '", mode, "': the parameter-server modes are ps:bsp, ps:asp and ps:ssp:S ",
                     "(S >= 0 steps of staleness)");
  }
  return true;
}

}  // namespace gyre::train
