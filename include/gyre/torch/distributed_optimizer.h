// Data-parallel training on libtorch: an optimizer wrapper that averages gradients across ranks,
// overlapping the allreduce with the backward pass.
//
//   auto comm = gyre::init();
//   auto sgd = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(lr));
//   gyre::torch::broadcastParameters(*model, *comm);
//   gyre::torch::DistributedOptimizer opt(comm, sgd);
//   ... opt.zeroGrad(); loss.backward(); opt.step();
//
// How it works. Every parameter's gradient lives in a flat bucket buffer (param.grad() is a view
// into it). zeroGrad() leaves the gradients undefined, as libtorch's zero_grad() does, so autograd
// hands each parameter its fresh gradient; a hook after each parameter's gradient accumulation
// copies it into its place in the bucket (one pass over memory: cheaper than zeroing the bucket
// and accumulating into it), points grad() there and marks it ready; after the allreduce the
// optimizer reads the averaged gradients in place, no copy out. A full bucket
// becomes an asynchronous allreduce on the communicator's thread while autograd goes on with the
// layers before it. Buckets are issued strictly in bucket order on every rank. The first buckets
// follow the parameters in reverse (the order backward usually produces them), cut by the caps;
// after the first step, rank 0's observed ready order and ready times are broadcast and the
// buckets are planned again from them, once: a bucket closes where the gradients after it come
// late enough that reducing it first pays (a small model's few layers get a bucket each when
// backward is long between them; gradients ready together share one). Later steps issue each
// bucket as soon as backward has filled it.
//
// With options.shardOptimizerState each bucket is reduce-scattered instead, every rank steps its
// part of the parameters and the parts are allgathered (see the option).
//
// Parameters that get no gradient in a step are reduced as zeros: step() zeroes their slots on a
// rank that produced nothing and issues the buckets still waiting,
// and afterwards every parameter's grad() holds the average over ranks (zero where no rank had
// a gradient). Every rank therefore issues the same buckets in the same order, whatever the
// model does.
//
// Thread-safety: one training thread drives an optimizer; hooks run on autograd's threads.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/torch/flat_state.h"
#include "gyre/torch/step_timing.h"
#include "gyre/torch/timeline.h"

namespace gyre::torch {

// How gradients travel. kFp16 and kBf16 halve the bytes on the wire: each bucket is converted
// before its allreduce and converted back into the float32 gradients afterwards (the reduction
// itself adds in float32). Only float32 gradients are compressed; others travel as they are.
//
// kTopK and kPowerSgd are lossy, with error feedback (what a step leaves out is added to the
// next step's gradients; src/torch/gradient_compression.h): top-k sends the topkRatio share of
// all gradient entries largest in magnitude, as value and index, in one allgather; PowerSGD
// sends a rank-powerSgdRank approximation of each weight matrix in two allreduces (biases and
// other small tensors, and matrices the rank would not shrink, uncompressed). Both need every
// gradient, so they run in step() after
// backward instead of overlapping it, and they need float32 gradients; not with
// shardOptimizerState or unevenInputs.
enum class Compression { kNone, kFp16, kBf16, kTopK, kPowerSgd };
std::string_view toString(Compression compression);
// "none", "fp16" (or "half"), "bf16", "topk[:RATIO]", "powersgd[:RANK]"; throws InvalidArgument
// otherwise (a ratio outside (0, 1], a rank below 1).
Compression parseCompression(std::string_view name);
struct DistributedOptimizerOptions;
// The same, setting options.compression and, when given, options.topkRatio or powerSgdRank.
void setCompression(DistributedOptimizerOptions& options, std::string_view spec);

struct DistributedOptimizerOptions {
  // No bucket holds more than this many bytes (25 MiB, as DDP); a larger gradient gets its own.
  std::size_t bucketCapBytes = kDefaultBucketCapBytes;
  // Until the first step has shown when gradients become ready, the first bucket (the last
  // layers' gradients) is smaller, so its allreduce starts early in the backward pass.
  std::size_t firstBucketCapBytes = 1u << 20;
  // Local gradient accumulation: gradients are allreduced on every k-th backward pass only, and
  // step() is expected after it. Values below 1 are rejected.
  int backwardPassesPerStep = 1;
  Compression compression = Compression::kNone;
  double topkRatio = 0.01;  // kTopK: the share of the entries that travel, in (0, 1]
  // kPowerSgd: the approximation's rank; a weight matrix n x m is approximated only where
  // (n + m) rank < n m, sent whole otherwise; the constructor refuses a rank that compresses none.
  int powerSgdRank = 4;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  // Average the gradients (true) or sum them.
  bool average = true;
  // Uneven inputs: ranks may run different numbers of steps. A rank that runs out of data calls
  // join(); until every rank has joined, the others' steps average over the ranks still
  // training. Costs one extra float per step and a scaling pass over the gradients.
  bool unevenInputs = false;
  // Time-out of each allreduce; zero: the communicator's.
  Timeout timeout{0};
  // Shard the optimizer step (ZeRO stage 1): gradients are reduce-scattered instead of
  // allreduced, each rank updates only its 1/W of every bucket's parameters with an optimizer of
  // the wrapped kind (same options per group, re-read at every step, so learning-rate schedules
  // apply) whose state covers only that part, and the updated parameters are allgathered. The
  // bytes on the wire are those of an allreduce; each rank's optimizer work and state are 1/W.
  // The parameters move into flat per-bucket buffers (each keeps its tensor; only the storage
  // changes). The wrapped optimizer must be SGD, Adam, AdamW, Adagrad or RMSprop (elementwise);
  // its own step and state are not used, so save or broadcast its state only without sharding.
  // After step(), grad() holds this rank's own gradients; synchronize() gathers the averages.
  // Needs float32 parameters and rules out compression and unevenInputs; the buckets keep their
  // first layout (they are not re-planned from the ready times, which would move the shards).
  bool shardOptimizerState = false;
  // With shardOptimizerState, shard the gradients too (ZeRO stage 2): each rank keeps only its
  // part of the reduced gradients. A bucket's buffer exists from the first gradient that reaches it
  // in a step until its reduce-scatter is done (checked as backward goes on, and at step()); then
  // only this rank's chunk is kept, and the parameters' grad() become undefined. The bytes on the
  // wire are the same; the gradients held between steps are 1/W. synchronize() gathers the
  // averages into whole buffers again (kept until the next step's reduce-scatter).
  bool shardGradients = false;
  // Sharded, with every rank on one host (shared-memory transport): the ranks keep one copy of
  // the parameters in shared memory, each updates its part in place, and a barrier replaces the
  // allgather. The constructor is then collective (it maps the memory); the parameters get
  // private storage again when the optimizer is destroyed.
  bool shareParametersOnHost = true;
  // Share every step's ready time of every rank (stepTimes()): from the end of a rank's previous
  // step() to its gradients being ready (its forward and backward passes and whatever the loop did
  // before them, waiting for data included), what tells a straggler. The times travel in W extra
  // floats of the last bucket's allreduce; with top-k or PowerSGD, a sharded step or uneven
  // inputs (or a last bucket that is not float32), in an allreduce of their own.
  bool shareStepTimes = false;
  // Where to record backward, each bucket's allreduce, the wait and the optimizer step (may be
  // null). See timeline.h; Timeline::fromEnvironment reads GYRE_TIMELINE.
  std::shared_ptr<Timeline> timeline;
  // Tune the bucket cap and the allreduce algorithm online (autotuned()): from the step that
  // plans the buckets, each candidate runs for 5 steps (the first untimed) and the ranks agree on
  // its median step time: the caps of 1, 4, 16 and 64 MiB and bucketCapBytes that give different
  // buckets, with `algorithm`, then auto, the ring and halving-doubling (those it is not) with the
  // best cap; the fastest is kept. bucketCapBytes and algorithm are the first candidate's. Not with
  // shardOptimizerState (its buckets never move), top-k or PowerSGD (no buckets) or unevenInputs.
  bool autotune = false;
  // Called once per reduction (a step's buckets, or its compressed gradients), before the
  // reduction's first collective, on the thread that issues it: an autograd hook's, or step()'s.
  // gyre's Python API coordinates the ranks there (Horovod's hvd.join and its checks that every
  // rank makes the same call). What it throws fails the reduction: it reaches the caller (the
  // backward pass, or step()), nothing of the step is sent, and the next backward pass starts
  // the next step afresh. Not called by reduceAsJoined().
  std::function<void()> beforeReduce;
};

// What options.autotune chose, and what it tried.
struct AutotuneResult {
  std::size_t bucketCapBytes = 0;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  double stepSeconds = 0;  // the chosen candidate's median step, its slowest rank's
  int trials = 0;
  int steps = 0;        // the steps the tuning took
  std::string summary;  // every candidate with its step time
};

class DistributedOptimizer {
 public:
  // Wraps `optimizer`, whose parameter groups hold the parameters to synchronise (every rank
  // must pass the same model, parameters in the same order). With more than one rank the
  // constructor is collective: it checks, always (one allgather of a small digest), that every
  // rank has the same parameters that require a gradient: count, then each one's shape and
  // dtype, in order; otherwise every rank throws InvalidArgument naming the first parameter that
  // differs, its shape and dtype on this rank and on the other, and the ranks that differ. Then
  // each parameter's grad() becomes a view into a bucket (with one rank there is nothing to
  // reduce: no check, no buckets, no hooks, the wrapped optimizer alone). With
  // shardOptimizerState and shareParametersOnHost it also maps shared memory with the other
  // ranks. Throws InvalidArgument for sparse or non-CPU parameters.
  DistributedOptimizer(std::shared_ptr<Communicator> comm, std::shared_ptr<::torch::optim::Optimizer> optimizer,
                       DistributedOptimizerOptions options = {});
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // Sets every gradient to undefined, as libtorch's zero_grad(); backward then fills them and
  // the hooks move them into the buckets.
  void zeroGrad();
  // Waits for the gradients' allreduce (issuing the buckets not yet issued), then runs the
  // wrapped optimizer's step. Collective: every rank calls it once per backwardPassesPerStep
  // backward passes. Throws PeerLostError/TimeoutError from the allreduce.
  void step();
  // step() without the optimizer step: afterwards every grad() holds the average.
  void synchronize();

  // Within this scope backward passes only accumulate locally; the first backward pass after it
  // ends (or step()) allreduces the sum, as DDP's no_sync().
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedOptimizer& owner);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedOptimizer& owner_;
  };
  NoSyncGuard noSync() { return NoSyncGuard(*this); }

  // Uneven inputs (options.unevenInputs): called by a rank with no data left. Keeps taking part
  // in the others' steps, with zero gradients and applying the same averaged update, so its
  // model stays identical to theirs; returns once every rank has joined. Collective.
  void join();
  // One reduction as a rank with no data left takes part in it (Horovod's hvd.join, which gyre's
  // Python API runs on such a rank when the others reduce): zero gradients from this rank into
  // the others' sum or average, without beforeReduce; afterwards every grad() holds the result,
  // as after synchronize(). Collective: the other ranks synchronize their step meanwhile.
  void reduceAsJoined();

  // Timing of the last step() and totals since construction or resetTiming().
  const StepTiming& lastStep() const;
  const StepTiming& totals() const;
  void resetTiming();

  ::torch::optim::Optimizer& optimizer();
  // The optimizer whose state this rank holds: with shardOptimizerState (and more than one rank)
  // the one over this rank's part of every bucket, whose state is what a checkpoint of this rank
  // saves and loads (it fits only the same world, buckets and parameters); else optimizer().
  ::torch::optim::Optimizer& stateOptimizer();
  // With shardOptimizerState (and more than one rank): where each of stateOptimizer()'s flat
  // parameters lies in `params` (the wrapped optimizer's parameters, or the whole model's that
  // hold them), what a checkpoint records so that another layout can resume it
  // (gyre/torch/flat_state.h). Empty otherwise.
  FlatLayout stateLayout(const std::vector<::torch::Tensor>& params);
  Communicator& communicator();
  const DistributedOptimizerOptions& options() const;
  // With options.shareStepTimes and more than one rank: the last step's ready time of each rank,
  // in seconds, by rank (every rank gets the same); empty otherwise or before the first step.
  std::vector<double> stepTimes() const;
  // Number of buckets and their sizes in bytes (as allreduced), in issue order.
  std::vector<std::size_t> bucketBytes() const;
  // The bytes of the training state this rank holds now: the parameters, the gradients (the
  // buckets' buffers that exist, and with shardGradients this rank's chunks) and the optimizer's
  // state (the shard optimizer's with shardOptimizerState, else the wrapped one's).
  std::size_t stateBytes() const;
  // options.autotune, once the tuning is done (the same on every rank); nullopt before, without
  // autotune and with one rank.
  std::optional<AutotuneResult> autotuned() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::torch
