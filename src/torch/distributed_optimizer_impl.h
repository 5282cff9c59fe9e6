// DistributedOptimizer's state (include/gyre/torch/distributed_optimizer.h), shared by its
// source files: distributed_optimizer.cc (buckets, hooks, synchronisation and the step) and
// distributed_optimizer_tune.cc (autotuning of the buckets and the allreduce algorithm).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "gyre/shared_memory.h"
#include "gyre/torch/distributed_optimizer.h"
#include "torch/bucket_layout.h"
#include "torch/fusion_tuner.h"
#include "torch/gradient_compression.h"
#include "torch/gradient_hooks.h"
#include "torch/shard_optimizer.h"

namespace gyre::torch {

using Clock = std::chrono::steady_clock;

// State shared by the hooks (autograd's thread) and the training thread.
class DistributedOptimizer::Impl {
 public:
  struct Slot {
    ::torch::Tensor param;
    std::size_t bucket = 0;
    std::size_t group = 0;   // the wrapped optimizer's parameter group
    std::size_t offset = 0;  // elements before it in its bucket
    ::torch::Tensor view;    // the slot's place in its bucket, shaped as the parameter
    int passes = 0;          // backward passes accumulated since the last synchronisation
    bool ready = false;
  };
  struct Bucket {
    ::torch::Tensor flat;  // the gradients, contiguous
    ::torch::Tensor wire;  // what travels: flat itself, or its fp16/bf16 copy
    DataType wireType = DataType::kFloat32;
    std::vector<std::size_t> slots;
    std::size_t pending = 0;  // slots not ready yet
    std::shared_ptr<Work> work;
    // Sharded step: the parameters, laid out as the gradients; flat and params hold
    // size() * chunk elements (zero padding at the end), rank r's part starts at r * chunk.
    ::torch::Tensor params;
    std::int64_t used = 0;  // elements that belong to parameters
    std::int64_t chunk = 0;
    // Sharded: the flat tensors the shard optimizer steps (over params), and where they lie.
    struct Part {
      ::torch::Tensor tensor;
      std::int64_t begin = 0;
      std::int64_t end = 0;
    };
    std::vector<Part> parts;
    // One gradient alone, reduced in the memory autograd gave it: no copy into the bucket. Its
    // flat then changes every step (see adoptGradient).
    bool direct = false;
    std::size_t wireBytes = 0;  // what one reduction moves: wire's bytes, also while flat is released
    // shardGradients: this rank's chunk of the reduced gradients, kept between steps; flat and
    // wire are undefined from the chunk's copy until the next step's first gradient.
    ::torch::Tensor gradShard;
  };

  Impl(std::shared_ptr<Communicator> comm, std::shared_ptr<::torch::optim::Optimizer> optimizer,
       DistributedOptimizerOptions options);
  ~Impl();

  void onGradientReady(std::size_t slot) GYRE_EXCLUDES(mu_);
  void zeroGrad() GYRE_EXCLUDES(mu_);
  // gatherGradients: sharded, also allgather the averaged gradients (step() needs only its part).
  void synchronize(bool active, bool gatherGradients = true) GYRE_EXCLUDES(mu_);
  void step() GYRE_EXCLUDES(mu_);
  void join() GYRE_EXCLUDES(mu_);
  void reduceAsJoined() GYRE_EXCLUDES(mu_);

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<::torch::optim::Optimizer> optimizer_;
  DistributedOptimizerOptions options_;
  // Guards what the hooks touch. The constructor alone sets sharded_, sharedParams_ and shard_
  // (sharded, the buckets are never laid out again).
  Mutex mu_;
  std::vector<Slot> slots_ GYRE_GUARDED_BY(mu_);
  std::vector<Bucket> buckets_ GYRE_GUARDED_BY(mu_);
  std::size_t nextToIssue_ GYRE_GUARDED_BY(mu_) = 0;
  // options.beforeReduce has run for this step's reduction (or reduceAsJoined skips it).
  bool reductionBegun_ GYRE_GUARDED_BY(mu_) = false;
  bool syncEnabled_ GYRE_GUARDED_BY(mu_) = true;
  bool sharded_ = false;
  bool shardGradients_ = false;  // sharded_ and options.shardGradients (ZeRO stage 2)
  std::shared_ptr<SharedMemory> sharedParams_;  // sharded on one host: the parameters, mapped by every rank
  ShardOptimizer shard_;                        // sharded_: steps this rank's part of every bucket
  // The post-hooks that call onGradientReady: installed by the constructor (world > 1), taken
  // off first by the destructor; the training thread's alone.
  GradientHooks hooks_;
  // kTopK, kPowerSgd: reduces every gradient at synchronize(), instead of the buckets.
  std::unique_ptr<detail::GradientCompressor> compressor_;
  // shareStepTimes: the ranks' ready times travel in the last bucket's W extra floats (else in an
  // allreduce of their own); the last step's, by rank.
  bool timesInBucket_ = false;
  std::vector<double> stepTimes_;
  // The buckets are planned from the ready order and times of the second synchronised step:
  // the first is a warm-up (first-touch allocations make its backward pass several times
  // slower, and unevenly so).
  static constexpr int kPlanningStep = 1;
  int synchronized_ GYRE_GUARDED_BY(mu_) = 0;     // steps synchronised so far
  bool recordOrder_ GYRE_GUARDED_BY(mu_) = true;  // until the buckets are planned
  std::vector<std::size_t> readyOrder_ GYRE_GUARDED_BY(mu_);
  // When each of readyOrder_ became ready, after the first.
  std::vector<double> readySeconds_ GYRE_GUARDED_BY(mu_);
  Clock::time_point stepBegin_ GYRE_GUARDED_BY(mu_);
  Clock::time_point firstReady_ GYRE_GUARDED_BY(mu_){};
  Clock::time_point lastReady_ GYRE_GUARDED_BY(mu_){};
  // The training thread's own: written under mu_ where it is held anyway, read without it by
  // join(), lastStep() and totals() (on that same thread).
  float activeRanks_ = 0;
  StepTiming last_;
  StepTiming totals_;
  // The allreduce algorithm of the buckets: options_.algorithm, or the tuner's choice.
  AllreduceAlgorithm algorithm_ GYRE_GUARDED_BY(mu_) = AllreduceAlgorithm::kAuto;
  // The ready order and times the buckets were planned from (kPlanningStep): the tuner plans
  // again from them.
  std::vector<std::size_t> plannedOrder_ GYRE_GUARDED_BY(mu_);
  std::vector<double> plannedReady_ GYRE_GUARDED_BY(mu_);
  // options.autotune: runs the trials from the planning step on; the end of the last step.
  std::unique_ptr<detail::FusionTuner> tuner_ GYRE_GUARDED_BY(mu_);
  Clock::time_point tuneMark_ GYRE_GUARDED_BY(mu_){};
  int tunedSteps_ GYRE_GUARDED_BY(mu_) = 0;
  std::optional<AutotuneResult> autotuned_ GYRE_GUARDED_BY(mu_);

 private:
  std::vector<GradientSlot> gradientShapes() const GYRE_REQUIRES(mu_);
  void layOut(const std::vector<BucketPlan>& plans) GYRE_REQUIRES(mu_);
  void issueReadyBuckets() GYRE_REQUIRES(mu_);
  // Starts the bucket's reduction on the communicator's thread, or (here) runs it on this one.
  void issue(Bucket& bucket, bool here) GYRE_REQUIRES(mu_);
  void recordReduction(StepTiming& timing, const Bucket& bucket, Clock::time_point begin,
                       Clock::time_point end) GYRE_REQUIRES(mu_);
  void ensureAliased(Slot& slot) GYRE_REQUIRES(mu_);
  void adoptGradient(Slot& slot, Bucket& bucket) GYRE_REQUIRES(mu_);
  void pointPartsAtGradients(Bucket& bucket) GYRE_REQUIRES(mu_);
  // shardGradients: the bucket's whole buffer again (its slots' views into it), for a new step's
  // gradients; and, once its reduce-scatter is done, this rank's chunk kept and the buffer
  // released (with the slots' gradients, which point into it).
  void materialize(Bucket& bucket) GYRE_REQUIRES(mu_);
  void keepChunkAndRelease(Bucket& bucket) GYRE_REQUIRES(mu_);
  // shardGradients, as backward goes on: releases the buckets whose reduce-scatter has finished.
  void releaseReducedBuckets() GYRE_REQUIRES(mu_);
  void buildShardOptimizer() GYRE_REQUIRES(mu_);
  StepTiming allgather(::torch::Tensor Bucket::*buffer, const char* what) GYRE_REQUIRES(mu_);
  void recordTransfer(StepTiming& timing, const char* what, const Bucket& bucket, std::size_t bytes,
                      Clock::time_point begin, Clock::time_point end) GYRE_REQUIRES(mu_);
  void adoptRankZeroOrder() GYRE_REQUIRES(mu_);
  // Shares this step's ready time in an allreduce of its own (when it cannot travel in a bucket).
  void shareStepTimes(double ready) GYRE_REQUIRES(mu_);
  // The end of every synchronize(): the step's count and timing.
  void finishSynchronize(Clock::time_point begin, StepTiming& timing) GYRE_REQUIRES(mu_);
  void resetForNextStep() GYRE_REQUIRES(mu_);
  // synchronize()'s work; synchronize() resets the step when it throws.
  void synchronizeLocked(bool active, bool gatherGradients) GYRE_REQUIRES(mu_);
  // options.beforeReduce, once per reduction, before its first collective; when it throws, the
  // step is reset so that the next backward pass starts afresh.
  void beginReduction() GYRE_REQUIRES(mu_);
  // Lays the buckets out again from the planned ready order, at most capBytes each (when that
  // changes the layout).
  void planAgain(std::size_t capBytes) GYRE_REQUIRES(mu_);
  // options.autotune (distributed_optimizer_tune.cc): builds the tuner once the buckets are
  // planned, with the caps that give different layouts; then, at the end of every synchronize(),
  // times the step and, at the end of each trial, agrees on its time and moves on.
  void startTuning() GYRE_REQUIRES(mu_);
  void tuneStep(Clock::time_point now) GYRE_REQUIRES(mu_);
};

}  // namespace gyre::torch
