// gyre train's flags as data: one declaration each (name, field, help, group, range, choices,
// scope, worker argument), in --help's order. options.cc turns the table into the command line,
// the worker's arguments and the checks (options.h).
#include <array>

#include "common/check.h"
#include "train/options.h"

namespace gyre::train {
namespace {

using O = TrainOptions;
constexpr FlagScope kLauncher = FlagScope::kLauncher;
constexpr FlagScope kWorker = FlagScope::kWorker;

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
    {.name = "--data",
     .field = &O::data,
     .help = "Train on your data instead of Fashion-MNIST: image folders (DATA/train/CLASS/*.png|*.jpg and "
             "DATA/test or DATA/val with the same class folders), tables (DATA/train.csv and DATA/test.csv, or "
             ".jsonl) or record shards (DATA/index.json, from gyre data pack); the data shape the model"},
    {.name = "--label-column",
     .field = &O::labelColumn,
     .help = "--data's tables: the column (or JSON key) holding the label; every other one is a feature",
     .needs = "--data"},
    {.name = "--skip-bad-records",
     .field = &O::skipBadRecords,
     .help = "--data: leave out up to N images, rows or records that cannot be read or decoded (or have "
             "another size), and say which (records: at the end of each epoch); one more is an error",
     .bound = Bound::kNonNegative,
     .needs = "--data"},
    {.name = "--resize",
     .field = &O::resize,
     .help = "--data: resize every image to HxW (bilinear), so the images may have any sizes",
     .needs = "--data"},
    {.name = "--augment",
     .field = &O::augment,
     .help = "Random augmentations of each training batch, comma-separated: flip (left to right, half the "
             "images), crop:N (pad by N pixels, cut the image's size at a random place)"},
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
     .help = "Continue from the newest valid checkpoint in --checkpoint-dir (from scratch if none), also on "
             "another number of workers, --pp or --zero (not --tp, nor --zero with --pp)",
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
    {.name = "--batch-shards",
     .field = &O::batchShards,
     .help = "Cut each global batch into N fixed shards, each a forward and backward pass of its own, so "
             "that a world that divides N computes each step's gradient as the full world does and a lost "
             "worker changes the speed, not the trajectory (default: --np; 1: one pass per worker)",
     .group = kElastic,
     .bound = Bound::kNonNegative,
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
    {.name = "--straggler-cpu",
     .field = &O::stragglerCpu,
     .help = "Instead of sleeping, the straggler's process gets this many cores by a CPU quota in a cgroup of "
             "its own (0.01 to 64; needs root and a cgroup cpu controller; 0: off)",
     .group = kBenchmarking,
     .bound = Bound::kNonNegative},
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
             "activations held), zero-bubble (weight gradients fill the idle time) or interleaved "
             "(--virtual-stages "
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

}  // namespace

std::span<const TrainFlag> trainFlags() {
  return kFlags;
}

const TrainFlag& trainFlag(std::string_view name) {
  for (const TrainFlag& f : kFlags)
    if (f.name == name) return f;
  GYRE_THROW(InvalidArgument, "unknown training flag ", name);
}

}  // namespace gyre::train
