// DistributedOptimizer's hot path (docs/data-parallel.md, "A gradient's journey"): a gradient
// ready in backward goes into its bucket (or is adopted as the bucket, uncopied); a full bucket
// starts its allreduce (reduce-scatter when sharded) on the communicator's thread, in the same
// order on every rank; synchronize() waits for what is still in flight, writes the averages back
// and records the step's timing; step() steps the wrapped (or sharded) optimizer.
#include <torch/csrc/autograd/variable.h>

#include <algorithm>

#include "common/check.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "gyre/errors.h"
#include "gyre/torch/distributed_optimizer.h"
#include "torch/bucket_layout.h"
#include "torch/distributed_optimizer_impl.h"
#include "torch/gradient_compression.h"
#include "torch/shard_optimizer.h"

namespace gyre::torch {

void DistributedOptimizer::Impl::adoptGradient(Slot& slot, Bucket& bucket) {
  // The bucket becomes the gradient autograd produced (contiguous and of the parameter's type;
  // zeros when there is none), so nothing is copied.
  ::torch::Tensor grad = slot.param.grad();
  if (grad.defined() && !grad.is_sparse() && slot.view.defined() && grad.data_ptr() == slot.view.data_ptr()) return;
  ::torch::NoGradGuard noGrad;
  if (!grad.defined()) {
    grad = ::torch::zeros_like(slot.param, ::torch::MemoryFormat::Contiguous);
  } else if (grad.is_sparse()) {  // nn.Embedding(sparse=True): reduced dense (Horovod's sparse_as_dense)
    grad = grad.to_dense().to(slot.param.scalar_type()).contiguous().view(slot.param.sizes());
  } else if (!grad.is_contiguous() || grad.scalar_type() != slot.param.scalar_type() ||
             grad.sizes() != slot.param.sizes()) {
    grad = grad.to(slot.param.scalar_type()).contiguous().view(slot.param.sizes());
  }
  slot.param.mutable_grad() = grad;
  slot.view = grad;
  bucket.flat = grad.view({-1});
  bucket.wire = bucket.flat;
  pointPartsAtGradients(bucket);
}

void DistributedOptimizer::Impl::ensureAliased(Slot& slot) {
  Bucket& bucket = buckets_[slot.bucket];
  if (bucket.direct) return adoptGradient(slot, bucket);
  if (!bucket.flat.defined()) materialize(bucket);  // ZeRO-2: this step's first gradient here
  // Someone replaced the gradient (set it to none, assigned a tensor): bring it home.
  const ::torch::Tensor& grad = slot.param.grad();
  if (grad.defined() && !grad.is_sparse() && grad.data_ptr() == slot.view.data_ptr()) return;
  ::torch::NoGradGuard noGrad;
  if (grad.defined()) {
    slot.view.copy_(grad.is_sparse() ? grad.to_dense() : grad);
  } else {
    slot.view.zero_();
  }
  slot.param.mutable_grad() = slot.view;
}

void DistributedOptimizer::Impl::onGradientReady(std::size_t index) {
  MutexLock lock(mu_);
  Slot& slot = slots_[index];
  ensureAliased(slot);
  if (!syncEnabled_ || slot.ready) return;
  if (++slot.passes < options_.backwardPassesPerStep) return;
  const auto now = Clock::now();
  if (firstReady_ == Clock::time_point{}) firstReady_ = now;
  lastReady_ = now;
  slot.ready = true;
  if (recordOrder_ && synchronized_ == kPlanningStep) {
    readyOrder_.push_back(index);
    readySeconds_.push_back(seconds(now - firstReady_));
  }
  if (--buckets_[slot.bucket].pending == 0) issueReadyBuckets();
}

void DistributedOptimizer::Impl::issueReadyBuckets() {
  // Strictly in bucket order, so every rank issues the same allreduces in the same order. The
  // last bucket waits for synchronize(): backward has nothing left to overlap it with, and
  // reducing it on the training thread saves two thread hand-offs.
  if (compressor_) return;  // it needs every gradient: synchronize()
  if (shardGradients_) releaseReducedBuckets();
  while (nextToIssue_ + 1 < buckets_.size() && buckets_[nextToIssue_].pending == 0)
    issue(buckets_[nextToIssue_++], false);
}

void DistributedOptimizer::Impl::beginReduction() {
  if (reductionBegun_) return;
  if (options_.beforeReduce) {
    try {
      options_.beforeReduce();
    } catch (...) {
      resetForNextStep();
      throw;
    }
  }
  reductionBegun_ = true;
}

void DistributedOptimizer::Impl::issue(Bucket& bucket, bool here) {
  beginReduction();
  if (bucket.wire.data_ptr() != bucket.flat.data_ptr()) {
    ::torch::NoGradGuard noGrad;
    bucket.wire.copy_(bucket.flat);
  }
  if (sharded_) {  // rank r receives the average of block r, in place
    CollectiveOptions c;
    c.op = options_.average ? ReduceOp::kAverage : ReduceOp::kSum;
    c.timeout = options_.timeout;
    float* flat = bucket.flat.data_ptr<float>();
    float* mine = flat + comm_->rank() * bucket.chunk;
    const auto count = static_cast<std::size_t>(bucket.chunk);
    if (here) {
      comm_->reduceScatter(flat, mine, count, c);
    } else {
      bucket.work = comm_->reduceScatterAsync(flat, mine, count, c);
    }
    return;
  }
  AllreduceOptions o;
  o.dtype = bucket.wireType;
  // Uneven inputs sum, and step() divides by the ranks that took part.
  o.op = options_.average && !options_.unevenInputs ? ReduceOp::kAverage : ReduceOp::kSum;
  o.algorithm = algorithm_;
  o.timeout = options_.timeout;
  void* data = bucket.wire.data_ptr();
  const auto count = static_cast<std::size_t>(bucket.wire.numel());
  if (here) {
    comm_->allreduce(data, data, count, o);
  } else {
    bucket.work = comm_->allreduceAsync(data, data, count, o);
  }
}

void DistributedOptimizer::Impl::recordReduction(StepTiming& timing, const Bucket& bucket,
                                                 Clock::time_point begin, Clock::time_point end) {
  ++timing.buckets;
  // The gradients' bytes: not the ready times that travel in the last bucket (shareStepTimes).
  std::size_t bytes = bucket.wireBytes;
  if (timesInBucket_ && &bucket == &buckets_.back())
    bytes -= static_cast<std::size_t>(comm_->size()) * static_cast<std::size_t>(bucket.wire.element_size());
  recordTransfer(timing, sharded_ ? "reduce-scatter" : "allreduce", bucket, bytes, begin, end);
}

void DistributedOptimizer::Impl::recordTransfer(StepTiming& timing, const char* what, const Bucket& bucket,
                                                std::size_t bytes, Clock::time_point begin,
                                                Clock::time_point end) {
  timing.communicate += seconds(end - begin);
  timing.bytes += bytes;
  if (options_.timeline)
    options_.timeline->span(
        Timeline::Track::kCommunication, what, begin, end,
        "\"bytes\":" + std::to_string(bytes) + ",\"bucket\":" + std::to_string(&bucket - buckets_.data()));
}

void DistributedOptimizer::Impl::zeroGrad() {
  // As libtorch's zero_grad(): the gradients become undefined, so autograd hands each parameter
  // its fresh gradient tensor without adding it to zeros; the ready hook copies it into the
  // bucket (one pass over the memory, where zeroing the bucket and accumulating into it take
  // two). Slots that get no gradient are zeroed at synchronisation.
  MutexLock lock(mu_);
  for (Slot& slot : slots_) slot.param.mutable_grad().reset();
}

void DistributedOptimizer::Impl::synchronize(bool active, bool gatherGradients) {
  MutexLock lock(mu_);
  try {
    synchronizeLocked(active, gatherGradients);
  } catch (...) {
    resetForNextStep();  // the next backward pass starts the next step afresh, as on every rank
    throw;
  }
}

void DistributedOptimizer::Impl::synchronizeLocked(bool active, bool gatherGradients) {
  const auto begin = Clock::now();
  const double ready = seconds(begin - stepBegin_);
  StepTiming timing;
  timing.steps = 1;
  if (comm_->size() > 1) {
    beginReduction();
    // Gradients that never became ready (unused parameters, or fewer backward passes than
    // promised) are reduced as they are: zeros unless something accumulated.
    {
      ::torch::NoGradGuard noGrad;
      for (Slot& slot : slots_)
        if (!slot.ready) ensureAliased(slot);
    }
    for (Bucket& bucket : buckets_) bucket.pending = 0;
    if (compressor_ && !buckets_.empty()) {
      std::vector<::torch::Tensor> grads;
      for (const Slot& slot : slots_) grads.push_back(slot.param.grad());
      const auto reduceBegin = Clock::now();
      const std::size_t bytes = compressor_->reduce(*comm_, grads, options_.average, options_.timeout);
      ++timing.buckets;
      recordTransfer(timing, toString(options_.compression).data(), buckets_.front(), bytes, reduceBegin,
                     Clock::now());
      shareStepTimes(ready);
      return finishSynchronize(begin, timing);
    }
    issueReadyBuckets();
    float active_ranks = active ? 1.0f : 0.0f;
    std::shared_ptr<Work> count;
    if (options_.unevenInputs) count = comm_->allreduceAsync(&active_ranks, &active_ranks, 1, {});
    std::exception_ptr failure;
    for (Bucket& bucket : buckets_) {
      if (!bucket.work) continue;  // the last bucket: reduced below
      try {
        bucket.work->wait();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
      recordReduction(timing, bucket, bucket.work->startedAt(), bucket.work->finishedAt());
    }
    if (count) {
      try {
        count->wait();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    if (!failure && !buckets_.empty()) {
      Bucket& last = buckets_.back();
      if (timesInBucket_) {  // this rank's time in its own float, zeros in the others' (in the
                             // wire's type: fp16/bf16 keep about 3 significant digits, enough)
        ::torch::NoGradGuard noGrad;
        ::torch::Tensor times = last.flat.narrow(0, last.used, comm_->size());
        times.zero_();
        times[comm_->rank()] = ready;
      }
      const auto reduceBegin = Clock::now();
      try {
        issue(last, true);
      } catch (...) {
        failure = std::current_exception();
      }
      recordReduction(timing, last, reduceBegin, Clock::now());
    }
    for (Bucket& bucket : buckets_) bucket.work.reset();
    if (failure) std::rethrow_exception(failure);
    activeRanks_ = active_ranks;
    ::torch::NoGradGuard noGrad;
    for (Bucket& bucket : buckets_) {
      if (shardGradients_) {
        // ZeRO-2: step() needs only this rank's chunk; synchronize() the whole average again.
        if (bucket.flat.defined()) keepChunkAndRelease(bucket);
        if (gatherGradients) {
          materialize(bucket);
          bucket.flat.narrow(0, comm_->rank() * bucket.chunk, bucket.chunk).copy_(bucket.gradShard);
          for (std::size_t index : bucket.slots) slots_[index].param.mutable_grad() = slots_[index].view;
        }
        continue;
      }
      if (bucket.wire.data_ptr() != bucket.flat.data_ptr()) bucket.flat.copy_(bucket.wire);
      if (options_.unevenInputs && options_.average && active_ranks > 0)
        bucket.flat.div_(static_cast<double>(active_ranks));
    }
    if (timesInBucket_) {
      const ::torch::Tensor times = buckets_.back().flat.narrow(0, buckets_.back().used, comm_->size());
      const double scale = options_.average ? comm_->size() : 1;  // the allreduce averaged them
      stepTimes_.assign(static_cast<std::size_t>(comm_->size()), 0);
      for (int r = 0; r < comm_->size(); ++r)
        stepTimes_[static_cast<std::size_t>(r)] = times[r].item<double>() * scale;
    } else {
      shareStepTimes(ready);
    }
    if (sharded_ && gatherGradients) timing += allgather(&Bucket::flat, "allgather gradients");
  }
  finishSynchronize(begin, timing);
}

void DistributedOptimizer::Impl::shareStepTimes(double ready) {
  if (!options_.shareStepTimes) return;
  std::vector<double> times(static_cast<std::size_t>(comm_->size()), 0);
  times[static_cast<std::size_t>(comm_->rank())] = ready;
  AllreduceOptions o;
  o.dtype = DataType::kFloat64;
  o.timeout = options_.timeout;
  comm_->allreduce(times.data(), times.data(), times.size(), o);
  stepTimes_ = std::move(times);
}

void DistributedOptimizer::Impl::finishSynchronize(Clock::time_point begin, StepTiming& timing) {
  if (comm_->size() > 1) {
    if (recordOrder_ && synchronized_ == kPlanningStep) adoptRankZeroOrder();
    ++synchronized_;
  }
  const auto end = Clock::now();
  if (tuner_) tuneStep(end);
  timing.wait = seconds(end - begin);
  if (options_.timeline) {
    if (firstReady_ != Clock::time_point{})
      options_.timeline->span(Timeline::Track::kCompute, "backward", firstReady_, lastReady_);
    options_.timeline->span(Timeline::Track::kCompute, "wait", begin, end);
  }
  last_ = timing;
  resetForNextStep();
}

void DistributedOptimizer::Impl::adoptRankZeroOrder() {
  // Everyone takes rank 0's ready order and times (every rank reaches this point in the same
  // synchronisation, kPlanningStep), and the buckets are planned from them: split where reducing early pays.
  recordOrder_ = false;
  const std::size_t n = slots_.size();
  std::vector<std::int64_t> record;  // n slot indices, then n ready times in nanoseconds
  std::vector<std::int64_t> nanos;
  std::vector<bool> seen(n, false);
  for (std::size_t k = 0; k < readyOrder_.size(); ++k) {
    const std::size_t index = readyOrder_[k];
    if (seen[index]) continue;
    seen[index] = true;
    record.push_back(static_cast<std::int64_t>(index));
    nanos.push_back(static_cast<std::int64_t>(readySeconds_[k] * 1e9));
  }
  // Gradients that never became ready are reduced at step(): after everything else.
  const std::int64_t last = nanos.empty() ? 0 : nanos.back();
  for (const Bucket& bucket : buckets_)
    for (std::size_t index : bucket.slots)
      if (!seen[index]) {
        record.push_back(static_cast<std::int64_t>(index));
        nanos.push_back(last);
      }
  record.insert(record.end(), nanos.begin(), nanos.end());
  readyOrder_.clear();
  readySeconds_.clear();
  BroadcastOptions o;
  o.dtype = DataType::kInt64;
  o.timeout = options_.timeout;
  comm_->broadcast(record.data(), record.size(), o);
  std::vector<std::size_t> order(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<double> ready;
  for (std::size_t k = n; k < 2 * n; ++k) ready.push_back(static_cast<double>(record[k]) * 1e-9);
  plannedOrder_ = std::move(order);
  plannedReady_ = std::move(ready);
  planAgain(options_.bucketCapBytes);
  if (options_.autotune) startTuning();
}

void DistributedOptimizer::Impl::planAgain(std::size_t capBytes) {
  auto plans = planBucketsByReadyTime(gradientShapes(), plannedOrder_, plannedReady_, capBytes);
  bool same = plans.size() == buckets_.size();
  for (std::size_t b = 0; same && b < plans.size(); ++b) same = plans[b].slots == buckets_[b].slots;
  if (!same) layOut(plans);
}

void DistributedOptimizer::Impl::resetForNextStep() {
  for (Slot& slot : slots_) {
    slot.passes = 0;
    slot.ready = false;
  }
  for (Bucket& bucket : buckets_) bucket.pending = bucket.slots.size();
  nextToIssue_ = 0;
  reductionBegun_ = false;
  firstReady_ = lastReady_ = Clock::time_point{};
}

void DistributedOptimizer::Impl::step() {
  synchronize(true, false);
  const auto begin = Clock::now();
  if (sharded_) {
    copyGroupOptions(*optimizer_, shard_);  // the user's schedule sets the rates there
    shard_.optimizer->step();
  } else {
    optimizer_->step();
  }
  const auto end = Clock::now();
  if (options_.timeline) options_.timeline->span(Timeline::Track::kCompute, "optimizer step", begin, end);
  if (sharedParams_) {
    // Every rank updated its part of the one copy: once all have, everyone reads the new values.
    // (A rank updates again only after the next step's reduce-scatter, which needs every rank's
    // gradients, so nobody writes while another still reads.)
    MutexLock lock(mu_);
    const auto barrierBegin = Clock::now();
    comm_->barrier();
    const auto barrierEnd = Clock::now();
    last_.wait += seconds(barrierEnd - barrierBegin);
    if (options_.timeline)
      options_.timeline->span(Timeline::Track::kCompute, "wait", barrierBegin, barrierEnd);
  } else if (sharded_) {
    // The parts each rank updated, to every rank.
    MutexLock lock(mu_);
    last_ += allgather(&Bucket::params, "allgather parameters");
  }
  const auto stepEnd = Clock::now();
  MutexLock lock(mu_);
  last_.step = seconds(stepEnd - stepBegin_);
  last_.compute = last_.step - last_.wait;
  stepBegin_ = stepEnd;
  totals_ += last_;
}

void DistributedOptimizer::Impl::join() {
  GYRE_USAGE_CHECK(options_.unevenInputs,
                   "join() needs DistributedOptimizerOptions::unevenInputs = true on every rank");
  for (;;) {
    zeroGrad();
    synchronize(false);
    if (activeRanks_ == 0) return;  // every rank has joined
    optimizer_->step();             // the same averaged update as the ranks still training
  }
}

void DistributedOptimizer::Impl::reduceAsJoined() {
  zeroGrad();
  {
    MutexLock lock(mu_);
    reductionBegun_ = true;  // the ranks that reduce their gradients coordinated the step
  }
  synchronize(false);
}

}  // namespace gyre::torch
