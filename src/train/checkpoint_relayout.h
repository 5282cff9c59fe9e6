// Resuming a checkpoint on another layout (docs/checkpoints.md): a checkpoint saved by a pipeline
// (--pp: each pipeline rank its stages' part, under DIR/rank-<r>/) or by an unsplit model (DIR/),
// resumed by a run with another number of workers or another --pp. Neither may use --tp or --zero
// (their parts are shares and shards of tensors; those still resume on their own layout only).
//
// Every worker reads one replica's parts of the saved layout (the directory must be one every
// worker reaches: one host, or a shared file system) into the whole model and each parameter's
// optimizer state, keeps what its own layout gives it, and takes the generator of the first part.
// Once every worker has loaded, worker 0 moves the saved layout's checkpoints to
// DIR/earlier-layouts/step-<S>/, out of the way of the new layout's saves and resumes; until the
// new layout has saved a checkpoint of its own, a resume finds them there (savedLayoutOf).
#pragma once

#include <torch/torch.h>

#include <string>

#include "train/checkpoint_rules.h"  // SavedLayout
#include "train/checkpointing.h"     // StartPoint
#include "train/options.h"

namespace gyre::train {

// Loads the newest step of which every part of one replica is valid into `model` (the whole model,
// as every layout without --tp builds it) and `optimizer` (over any of its parameters: each gets
// its own state, from the part that trained it), and sets the generator from the first part.
// `saved` is savedLayoutOf's. Throws InvalidArgument when no step has every part valid, a
// checkpoint was saved with other flags (checkpointIncompatibility), or a pipeline's checkpoint
// does not say how its stages were cut (saved before checkpoints recorded stage_layers).
// Returns where training starts, its path the first part's directory.
StartPoint loadOnThisLayout(const TrainOptions& o, const SavedLayout& saved, const std::string& current,
                            ::torch::nn::Sequential model, ::torch::optim::Optimizer& optimizer);

// Moves DIR's checkpoints (DIR/rank-* and DIR/ckpt-*) to DIR/earlier-layouts/NAME/ (NAME-2, ...
// when that exists) and returns where they went: "step-<S>" for a layout just converted (a later
// resume looks there until the new layout saves), "unfinished-after-step-<S>" for what a
// converted run left before it saved a step every part finished (never resumed from). Throws
// SystemError.
std::string moveAside(const std::string& dir, const std::string& name);

}  // namespace gyre::train
