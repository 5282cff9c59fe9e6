// The records gyre train writes for other programs to read: an epoch's line of metrics.jsonl
// (also what --json prints), a step's line of steps.jsonl and an evaluation's line of eval.jsonl
// (--eval-every). They are written and read through
// this header only, as leveldb's log_format.h is, so each field is named in one place: the
// trainer writes them (report.h), gyre report, gyre bench and gyre train's own reference lookup
// read them. Libtorch-free.
//
// Versions: an epoch record carries "version" (kRecordVersion); step and evaluation records,
// short and many, do not. A reader takes a record without one (as gyre wrote them
// before it had one) as version 1, takes a field it does not know as nothing,
// takes a missing field as its default (null where the field can be unknown), and refuses a
// newer version or a field of the wrong type with gyre::Error naming it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/stragglers.h"  // Straggler

namespace gyre::train {

inline constexpr int kRecordVersion = 1;

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
struct PipelineRecord {
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

// One epoch's figures, the same on every rank (averaged or summed across ranks). Its JSON
// fields, in order: version, epoch, epochs, world, plain, model, batch, per_rank_batch, lr,
// compression, loss, test_accuracy, samples_per_s, seconds, steps, timed_steps, speedup,
// efficiency, compute_s, communicate_s, bytes_per_step, stragglers ({rank, since_step, factor}),
// dropped_gradients, autotune ({bucket_cap_mb, algorithm, step_ms, trials, steps, summary}),
// wait_s, hidden_s, data_wait_s, torch_threads, blas_threads, checkpoints ({step, bytes, stall_s,
// path}), mode, servers, staleness, clock_wait_s, peak_rss_bytes, model_state_bytes,
// parameter_bytes, pipeline
// ({pp, dp, micro_batches, schedule, balance, bubble, ideal_bubble, stage_times_bubble, stage_ms,
// peak_activation_bytes}); an optional field that is unknown or does not apply is null.
struct EpochRecord {
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
  // workers, without trailing zeros; the last entry counts WorkerStats::kMaxStaleness and above)
  // and the seconds a worker was blocked in clock() (averaged over the workers).
  std::optional<int> servers;
  std::optional<std::vector<std::uint64_t>> staleness;
  std::optional<double> clockWaitS;
  std::optional<PipelineRecord> pipeline;
  // Memory, the largest over the workers: the process's resident-set high-water mark (getrusage)
  // and the bytes of its training state as it holds them: the parameters it trains, their
  // gradients and the optimizer's state, sharded under --zero (null in a ps mode, where the
  // servers hold it); and the bytes of memory the model's parameters and buffers lie in on it at
  // the epoch's end, each storage once (its stages, shards or shares, or the whole model).
  std::int64_t peakRssBytes = 0;
  std::optional<std::int64_t> modelStateBytes;
  std::int64_t parameterBytes = 0;
};

// One step of steps.jsonl: the global step from 1, its epoch from 1, its training loss averaged
// over the ranks and the learning rate it used.
struct StepRecord {
  std::int64_t step = 0;
  int epoch = 0;
  double loss = 0;
  double lr = 0;
};

// What a resume compares of the run that saved a checkpoint with its own run: the fields of
// config.json that the checkpoint rules read (checkpoint_rules.h). A checkpoint keeps its run's
// config.json in its state.json. A field missing from a checkpoint saved before it existed reads
// as its default.
struct CheckpointConfig {
  std::string model;
  bool syncBn = false;
  std::int64_t batch = 0;
  std::int64_t seed = 0;
  std::string optimizer = "sgd";
  int world = 1, pp = 1, tp = 1, zero = 0;
  std::optional<double> bucketCapMb;            // --zero 1 and 2 keep the buckets' layout
  std::optional<std::vector<int>> stageLayers;  // --pp: the layers of each stage as the run cut them
};

// One line of eval.jsonl (--eval-every): the model after `step` steps, `timeS` seconds of
// training in, scored on the whole test set.
struct EvalRecord {
  std::int64_t step = 0;
  double timeS = 0;
  double testAccuracy = 0;  // a fraction
};

nlohmann::ordered_json toJson(const EpochRecord& record);
nlohmann::ordered_json toJson(const StepRecord& record);
nlohmann::ordered_json toJson(const EvalRecord& record);
nlohmann::ordered_json toJson(const CheckpointConfig& config);

// Read back as the header says. Throws gyre::Error naming the field (and the record's version
// when it is newer than kRecordVersion).
EpochRecord epochRecordFromJson(const nlohmann::json& j);
StepRecord stepRecordFromJson(const nlohmann::json& j);
EvalRecord evalRecordFromJson(const nlohmann::json& j);

// A line of metrics.jsonl or steps.jsonl (or of a program's output that holds them): nullopt for
// a line that is not a JSON object or has not the fields that make it such a record ("epoch" and
// "samples_per_s"; "step"; "step" and "test_acc"); gyre::Error, naming the line, for a record
// with a field of the wrong type or a newer version.
std::optional<EpochRecord> parseEpochRecord(const std::string& line);
std::optional<StepRecord> parseStepRecord(const std::string& line);
std::optional<EvalRecord> parseEvalRecord(const std::string& line);
// config.json's text (or a part of it with these fields) as a checkpoint's config; nullopt when it
// is not a JSON object with fields of the right types.
std::optional<CheckpointConfig> parseCheckpointConfig(const std::string& text);

}  // namespace gyre::train
