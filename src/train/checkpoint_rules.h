// Which checkpoints a run may resume, as plain rules on their saved config (libtorch-free): the
// worker applies them to every checkpoint it loads, and `gyre train --resume` to the newest one
// before any worker starts, so that a checkpoint of another layout or model is refused at once,
// with the workers' own message. docs/checkpoints.md.
#pragma once

#include <string>

#include "train/options.h"
#include "train/records.h"

namespace gyre::train {

// The flags a resumed run must share with the run that saved the checkpoint: the model, the
// global batch (the sampler's position counts global samples), the seed (the samples' order) and
// the optimizer (its state). "" when they match, else what differs. `saved` and `current` are the
// runs' config.json texts (current needs those keys only).
std::string checkpointIncompatibility(const std::string& saved, const std::string& current,
                                      const std::string& path);

// A split model's parts fit only the layout that saved them: the same workers, --pp, --tp and
// --zero (and so the same replicas and shards), and with --zero 1 and 2 the same buckets. "" when
// they match. (The workers convert what convertibleLayouts accepts before this is asked: what is
// left is a part whose config differs from its layout's first part.)
std::string checkpointLayoutMismatch(const std::string& saved, const std::string& current,
                                     const std::string& path);

// Whether a run whose config is `current` (the trainer's config.json) resumes a checkpoint saved
// with `saved` (its config) by converting it: both are readable, either one is split (--pp, --tp or
// --zero), and they differ in the world, --pp, --tp, the ZeRO stage or (--zero 1 and 2) the
// buckets, or the same ones have the stages cut elsewhere (stage_layers).
bool convertibleLayouts(const std::string& saved, const std::string& current);

// Where a conversion moves the checkpoints of the layout it converted: DIR/earlier-layouts/step-<S>/.
inline constexpr const char* kEarlierLayouts = "earlier-layouts";

// The checkpoints a resume from DIR starts from: DIR's own (its parts under DIR/rank-<r>/, or its
// ckpt-*), or, when DIR holds no complete one, those of the newest layout a conversion set aside
// (earlier: the run that converted them stopped before it saved its own).
struct SavedLayout {
  std::string dir;     // DIR, or DIR/earlier-layouts/step-<S>; "" when there is none
  std::string config;  // the newest complete checkpoint's config (of rank 0's part)
  bool earlier = false;
};
SavedLayout savedLayoutOf(const std::string& dir);

// Whether a run whose config is `current` resumes `saved` by converting it: convertibleLayouts,
// or any layout a conversion reaches for checkpoints set aside.
bool resumesConverted(const SavedLayout& saved, const std::string& current);
// The refusal of a run when DIR holds only set-aside checkpoints whose config cannot be read.
std::string setAsideOnlyMessage(const std::string& dir, const std::string& aside);

// The newest checkpoint in `dir` that finished writing (ckpt-<step>/manifest.json), or "".
std::string newestCompleteCheckpoint(const std::string& dir);
// The config.json text saved in checkpoint `path` (its state.json), or "" when unreadable.
std::string savedCheckpointConfig(const std::string& path);
// One of the values saved in checkpoint `path` (state.json's "values"), or "" when absent.
std::string savedCheckpointValue(const std::string& path, const std::string& key);

// Where rank `rank` keeps its part of a split model's checkpoints: DIR/rank-<r>.
std::string splitCheckpointDir(const std::string& dir, int rank);

// The refusals of a directory of the other kind.
std::string unsplitCheckpointsMessage(const std::string& dir, const std::string& path);
std::string splitCheckpointsMessage(const std::string& dir);

// The part of config.json these rules read (records.h), for a run of `o` on `world` workers, as
// a record and as text.
CheckpointConfig checkpointConfigOf(const TrainOptions& o, int world);
std::string resumeConfig(const TrainOptions& o, int world);

// gyre train --resume, before any worker starts: the newest complete checkpoint in
// --checkpoint-dir (rank 0's part, for a split model) checked against this run of `world`
// workers. InvalidArgument with the workers' message when it may not be resumed; nothing when
// there is none, or its config cannot be read (the workers then decide).
void checkResumeBeforeStart(const TrainOptions& o, int world);

}  // namespace gyre::train
