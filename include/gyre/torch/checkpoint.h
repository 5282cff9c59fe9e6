// Verified, atomic, asynchronous checkpoints of a libtorch training run.
//
//   gyre::torch::Checkpointer ckpt({.dir = "ckpt", .keepLast = 3});      // rank 0 only
//   ...
//   if (step % 100 == 0) {
//     gyre::torch::CheckpointState s;
//     s.step = step; s.epoch = epoch; s.sampler = {epoch, samplesDoneThisEpoch};
//     SaveStats st = ckpt.save(*model, *sgd, s);   // snapshot: the training loop pays only this
//   }
//   ...
//   ckpt.wait();                                   // flush (and surface a write error)
//
//   // On restart (any world size):
//   if (auto loaded = gyre::torch::loadLatestCheckpoint("ckpt", *model, sgd.get())) { ... }
//
// Layout: DIR/ckpt-<step, 12 digits>/ holds model.pt (torch::save of the module: parameters and
// buffers, readable with torch::load), optimizer.pt (the optimizer's state and every parameter
// group's options), torch_rng.bin (the default CPU generator's state), state.json (step, epoch,
// sampler position, schedule, user values, the run's config) and manifest.json (size and CRC32C
// of every other file). Each file is written under a temporary name, fsynced and renamed; the
// manifest comes last, so a checkpoint without one is incomplete. See docs/checkpoints.md.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gyre::torch {

// Where a DistributedSampler stands: its epoch, and how many samples of that epoch's global order
// (all ranks together) have been trained on. Independent of the number of ranks: with global
// batch B, after s steps of an epoch index = s * B, and a world of W ranks resumes each rank at
// offset index / W of its own DistributedSampler::indices() (see localOffset).
struct SamplerPosition {
  std::int64_t epoch = 0;
  std::int64_t index = 0;
  // index / ranks; throws InvalidArgument unless index is a multiple of ranks.
  std::int64_t localOffset(int ranks) const;
};

// Everything a checkpoint holds besides the model, the optimizer and the RNG.
struct CheckpointState {
  std::int64_t step = 0;   // optimizer steps done, over the whole run
  std::int64_t epoch = 0;  // the epoch in progress, from 0 (== sampler.epoch for one sampler)
  SamplerPosition sampler;
  // The learning-rate schedule: the step it is at and the rate it set last. gyre's schedules
  // (WarmupSchedule, the trainer's cosine) are functions of the step, so these restore them.
  std::int64_t scheduleStep = 0;
  double lr = 0;
  // Your own key/values, as UTF-8 text (encode binary, e.g. as hex). A std:: random engine goes
  // in with `std::ostringstream out; out << engine; values["rng"] = out.str();` and comes back
  // with `std::istringstream(values["rng"]) >> engine`.
  std::map<std::string, std::string> values;
  std::string config;  // the run's configuration, JSON text ("" for none)
};

struct CheckpointOptions {
  std::string dir;   // created when missing
  int keepLast = 3;  // complete checkpoints kept; older ones go once a newer one is complete
};

// What one save() cost the caller and wrote.
struct SaveStats {
  std::int64_t step = 0;
  std::string path;         // DIR/ckpt-<step>
  std::uint64_t bytes = 0;  // the checkpoint's files (the manifest adds a few hundred bytes)
  double stallS = 0;        // seconds save() held the caller: waitS + the snapshot
  double waitS = 0;         // of which waiting for the previous write to finish
};

// Writes checkpoints of one run into one directory, one at a time, on a background thread.
//
// save() serializes the model, the optimizer, the default CPU generator's state and `state` into
// memory on the calling thread (the snapshot), then returns; a writer thread checksums and writes
// the files and the manifest, fsyncs them and the directory, and then deletes the checkpoints
// beyond keepLast. At most one write is in flight: save() while the previous checkpoint is still
// being written first waits for it (the wait is part of the stall and reported as waitS).
//
// A failed write (disk full, directory unwritable or gone) leaves no loadable half checkpoint
// (its files and directory are removed; without a manifest it would not load anyway), deletes no
// earlier checkpoint, and never touches the training state; its error is thrown, as SystemError
// naming the file and the reason, by the next save() or wait(). After that the Checkpointer can
// be used again.
//
// Thread-safety: one thread calls save() and wait(); the writer thread is internal.
class Checkpointer {
 public:
  // Creates options.dir (and its parents). Throws SystemError when it cannot, InvalidArgument
  // for an empty dir or keepLast < 1.
  explicit Checkpointer(CheckpointOptions options);
  // Waits for the write in flight; an error it had is printed on stderr (a destructor cannot
  // throw): call wait() first to handle it.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Snapshots and starts writing DIR/ckpt-<state.step>; an existing directory of that name (a
  // leftover of an earlier run) is replaced. Throws SystemError for the previous write's failure
  // (this save then does nothing), InvalidArgument for values that are not UTF-8 text, and
  // libtorch's c10::Error if the model or optimizer cannot be serialized.
  SaveStats save(const ::torch::nn::Module& model, const ::torch::optim::Optimizer& optimizer,
                 const CheckpointState& state);
  // Blocks until the write in flight (if any) is on disk. Throws its SystemError.
  void wait();

  const CheckpointOptions& options() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A checkpoint directory found in DIR: complete when it has its manifest (verified or not).
struct CheckpointInfo {
  std::int64_t step = 0;
  std::string path;
  bool complete = false;
};
// The ckpt-<step> directories in `dir`, oldest step first; none when `dir` does not exist.
std::vector<CheckpointInfo> listCheckpoints(const std::string& dir);

// Checks one checkpoint directory against its manifest: every file present, of the recorded size
// and checksum. Returns "" when it is valid, else one line naming the file and what is wrong
// ("model.pt: truncated (1024 of 4096 bytes)", "manifest.json missing: incomplete", ...).
std::string verifyCheckpoint(const std::string& path);

struct LoadOptions {
  // Called with one line for each checkpoint skipped as invalid (newest first); the default
  // prints "gyre: skipping checkpoint PATH: REASON" on stderr.
  std::function<void(const std::string& path, const std::string& reason)> onSkip;
  bool restoreRng = true;  // set the default CPU generator's state from the checkpoint
  // Called with the newest valid checkpoint's state and path before anything is loaded into the
  // model or the optimizer: it may throw (InvalidArgument) to refuse it, changing nothing.
  std::function<void(const CheckpointState& state, const std::string& path)> accept;
};

struct LoadedCheckpoint {
  CheckpointState state;
  std::string path;
  std::string torchRngState;  // the saved generator state (bytes), for setTorchRngState elsewhere
};

// Loads the newest valid checkpoint in `dir` into `model` and `optimizer` (may be null): each
// newer invalid one (incomplete, truncated, corrupted) is reported through options.onSkip and
// passed over. Returns nullopt when there is none (or `dir` does not exist). The values are copied
// into the model's tensors, which keep their storage (views of them stay views). Every file is
// verified before anything is loaded; a valid checkpoint that does not fit the model (another
// architecture) throws InvalidArgument, and the model may then be partly loaded.
std::optional<LoadedCheckpoint> loadLatestCheckpoint(const std::string& dir, ::torch::nn::Module& model,
                                                     ::torch::optim::Optimizer* optimizer,
                                                     const LoadOptions& options = {});

// Loads one checkpoint directory of listCheckpoints, as loadLatestCheckpoint would; throws
// InvalidArgument when it is not valid (naming why) or does not fit.
LoadedCheckpoint loadCheckpoint(const CheckpointInfo& checkpoint, ::torch::nn::Module& model,
                                ::torch::optim::Optimizer* optimizer, const LoadOptions& options = {});

// The default CPU generator's state as bytes, and setting it back (e.g. on the ranks that did not
// load the checkpoint themselves). setTorchRngState throws InvalidArgument for bytes of the wrong
// size.
std::string torchRngState();
void setTorchRngState(const std::string& bytes);

}  // namespace gyre::torch
