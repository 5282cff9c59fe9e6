// The trainer's side of checkpoints (docs/checkpoints.md): rank 0 loads the newest valid one and
// every rank receives it (so any number of workers can resume), rank 0 saves. A split model (--pp,
// --tp, --zero: each rank holds its own stages, share or shard of the state) is saved by every
// rank, each its own part under DIR/rank-<r>/ (checkpointing.cc), and resumes on the same layout
// only, from the newest step every rank saved.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gyre/communicator.h"
#include "gyre/torch/checkpoint.h"
#include "gyre/torch/flat_state.h"
#include "train/checkpoint_rules.h"
#include "train/trainer.h"

namespace gyre::train {

// Where training starts: from scratch, or a checkpoint's position.
struct StartPoint {
  std::int64_t step = 0;   // global steps done
  std::int64_t epoch = 0;  // the epoch to run next, from 0
  std::int64_t index = 0;  // samples of that epoch's global order done (a multiple of the batch)
  std::string path;        // the checkpoint; empty: from scratch
};

// What a converted checkpoint goes into on this layout: the whole model (every layout has it, or
// builds one to resume --zero 3), and the optimizer whose state this rank keeps: over parameters
// of `whole` (unsplit, pipeline stages), with `flats` over flat shards of them (--zero:
// DistributedOptimizer::stateLayout, FullyShardedModel::shardLayout), which with flatValues
// (--zero 3) hold this rank's part of the values too, or with `share` over this rank's share of
// the vit (--tp: vit_parallel.h's twin of `whole`, rank `rank` of `ranks`; with `flats` too, over
// flat shards of the share's parameters: --zero 1 and 2 beside --tp).
struct ResumeTarget {
  struct TensorParallelShare {
    ::torch::nn::Sequential model;
    int ranks = 1;
    int rank = 0;
  };
  ::torch::nn::Sequential whole;
  std::optional<gyre::torch::FlatLayout> flats;
  bool flatValues = false;
  std::optional<TensorParallelShare> share;
};

class TrainCheckpoints {
 public:
  // `comm` null: plain mode, a world of one.
  TrainCheckpoints(const TrainOptions& options, std::shared_ptr<Communicator> comm);
  ~TrainCheckpoints();

  bool enabled() const { return !o_.checkpointDir.empty(); }
  // Whether a checkpoint is due after global step `step` (every checkpointEvery steps).
  bool due(std::int64_t step) const;

  // Collective. With resume, rank 0 loads the newest valid checkpoint into `model` and `optimizer`
  // and restores the generator, and every other rank receives the same model, optimizer state and
  // generator state. Without resume it only checks that the directory holds no complete
  // checkpoint. Throws InvalidArgument on every rank when rank 0 refuses (a checkpoint without
  // resume, one of another model, global batch or seed) and gyre::Error when it fails.
  // `config` is this run's config.json. `target`, when given, is where a checkpoint of another
  // layout that checkpoint_relayout.h converts goes: every rank loads it into the target's whole
  // model (and share) and `optimizer`.
  StartPoint start(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer, const std::string& config,
                   const ResumeTarget* target = nullptr);

  // Rank 0 snapshots and starts writing; the other ranks do nothing (nullopt). Throws the
  // previous write's SystemError.
  std::optional<CheckpointSave> save(const ::torch::nn::Module& model,
                                     const ::torch::optim::Optimizer& optimizer,
                                     const gyre::torch::CheckpointState& state);
  std::int64_t lastSavedStep() const { return lastSaved_; }
  // Rank 0 (every rank with a split model): waits for the write in flight and throws its error.
  void finish();

 private:
  // A split model's start: every rank its own part.
  StartPoint startSplit(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer, const std::string& config);
  // A checkpoint of another layout (checkpoint_relayout.h): every rank loads it.
  StartPoint startConverted(const ResumeTarget& target, ::torch::optim::Optimizer& optimizer,
                            const SavedLayout& saved, const std::string& config);
  TrainOptions o_;
  std::shared_ptr<Communicator> comm_;
  int rank_;
  std::unique_ptr<gyre::torch::Checkpointer> writer_;  // rank 0, when enabled
  std::int64_t lastSaved_ = -1;
  bool split_ = false;  // --pp, --tp or --zero: every rank saves its own part
  std::string dir_;     // where this rank's checkpoints go: DIR, or DIR/rank-<r> when split
};

// The records of a run's metrics.jsonl up to `epoch`, and of its steps.jsonl up to `step`
// (records.h), as the lines they were, each with its newline; lines that are not such records
// are dropped, and a missing file has none. What a resumed run keeps of its run directory.
std::string epochLinesUpTo(const std::string& path, std::int64_t epoch);
std::string stepLinesUpTo(const std::string& path, std::int64_t step);

}  // namespace gyre::train
