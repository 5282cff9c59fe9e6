// Resuming a checkpoint on another layout (docs/checkpoints.md, "Another layout"): a checkpoint
// saved by an unsplit model (DIR/), a pipeline (--pp: each pipeline rank its stages' part), tensor
// parallelism (--tp: each rank its share of its stages' tensors, cut along rows or columns) or
// ZeRO (--zero 1|2: each rank the optimizer state of its part of every bucket; --zero 3: its shard
// of every unit, parameters and state), each part under DIR/rank-<r>/, resumed by a run with
// another number of workers, --pp, --tp or --zero, and their combinations (--zero 1 and 2 beside
// --pp or --tp: its flats lie over a stage's or a share's parameters).
//
// Every worker reads one replica's parts of the saved layout (the directory must be one every
// worker reaches: one host, or a shared file system) into the whole model and each parameter's
// whole optimizer state (ZeRO's parts say where their flat shards lie: the shard_layout value each
// saves; --tp's shares join as vit_parallel.h cuts them), keeps what its own layout gives it (its
// stages, its shares, or its own flats cut from the whole), and takes the generator of the first
// part. Once every worker has loaded, worker 0 moves the saved layout's checkpoints to
// DIR/earlier-layouts/step-<S>/, out of the way of the new layout's saves and resumes; until the
// new layout has saved a checkpoint of its own, a resume finds them there (savedLayoutOf).
#pragma once

#include <torch/torch.h>

#include <string>

#include "train/checkpoint_rules.h"  // SavedLayout
#include "train/checkpointing.h"     // StartPoint, ResumeTarget
#include "train/options.h"

namespace gyre::train {

// Loads the newest step of which every part of one replica is valid into `target` (the values
// into its whole model, the state of each of the optimizer's parameters from the parts that
// trained it), and sets the generator from the first part. `saved` is savedLayoutOf's. Throws
// InvalidArgument when no step has every part valid, a checkpoint was saved with other flags
// (checkpointIncompatibility), or a pipeline's or ZeRO's checkpoint does not say how it was cut
// (saved before checkpoints recorded stage_layers or shard_layout). Returns where training
// starts, its path the first part's directory.
StartPoint loadOnThisLayout(const TrainOptions& o, const SavedLayout& saved, const std::string& current,
                            const ResumeTarget& target, ::torch::optim::Optimizer& optimizer);

// The value a ZeRO part records of where its flat shards lie (flat_state.h's text).
inline constexpr const char* kShardLayoutValue = "shard_layout";

// Moves DIR's checkpoints (DIR/rank-* and DIR/ckpt-*) to DIR/earlier-layouts/NAME/ (NAME-2, ...
// when that exists) and returns where they went: "step-<S>" for a layout just converted (a later
// resume looks there until the new layout saves), "unfinished-after-step-<S>" for what a
// converted run left before it saved a step every part finished (never resumed from). Throws
// SystemError.
std::string moveAside(const std::string& dir, const std::string& name);

}  // namespace gyre::train
