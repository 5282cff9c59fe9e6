#include "gyre/torch/distributed_optimizer.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>

#include "common/check.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"
#include "torch/bucket_layout.h"
#include "torch/distributed_optimizer_impl.h"
#include "torch/gradient_compression.h"
#include "torch/optimizer_bytes.h"
#include "torch/parameter_check.h"
#include "torch/shard_optimizer.h"

namespace gyre::torch {
namespace {

// n rounded up to a multiple of `step`.
std::int64_t roundUp(std::int64_t n, std::int64_t step) { return (n + step - 1) / step * step; }

// Bytes of `numel` floats, rounded up to a cache line.
std::size_t alignedFloatBytes(std::int64_t numel) {
  return static_cast<std::size_t>(roundUp(numel * static_cast<std::int64_t>(sizeof(float)), 64));
}

}  // namespace

StepTiming& StepTiming::operator+=(const StepTiming& other) {
  steps += other.steps;
  step += other.step;
  compute += other.compute;
  communicate += other.communicate;
  wait += other.wait;
  bytes += other.bytes;
  buckets += other.buckets;
  return *this;
}

namespace {

// Runs after autograd has accumulated a parameter's gradient.
class ReadyHook final : public ::torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DistributedOptimizer::Impl* impl, std::size_t slot) : impl_(impl), slot_(slot) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    impl_->onGradientReady(slot_);
    return outputs;
  }

 private:
  DistributedOptimizer::Impl* impl_;
  std::size_t slot_;
};

}  // namespace

DistributedOptimizer::Impl::Impl(std::shared_ptr<Communicator> comm,
                                 std::shared_ptr<::torch::optim::Optimizer> optimizer,
                                 DistributedOptimizerOptions options)
    : comm_(std::move(comm)), optimizer_(std::move(optimizer)), options_(std::move(options)) {
  GYRE_USAGE_CHECK(comm_ != nullptr, "DistributedOptimizer needs a communicator");
  GYRE_USAGE_CHECK(optimizer_ != nullptr, "DistributedOptimizer needs an optimizer to wrap");
  GYRE_USAGE_CHECK(options_.backwardPassesPerStep >= 1,
                   "backwardPassesPerStep must be at least 1, not ", options_.backwardPassesPerStep);
  GYRE_USAGE_CHECK(options_.bucketCapBytes > 0 && options_.firstBucketCapBytes > 0, "bucket caps must be positive");
  sharded_ = options_.shardOptimizerState && comm_->size() > 1;
  GYRE_USAGE_CHECK(!options_.shardGradients || options_.shardOptimizerState,
                   "DistributedOptimizer: shardGradients (ZeRO stage 2) needs shardOptimizerState");
  shardGradients_ = sharded_ && options_.shardGradients;
  GYRE_USAGE_CHECK(!sharded_ || options_.compression == Compression::kNone,
                   "DistributedOptimizer: shardOptimizerState reduce-scatters float32 gradients; turn compression off");
  GYRE_USAGE_CHECK(!sharded_ || !options_.unevenInputs,
                   "DistributedOptimizer: shardOptimizerState and unevenInputs (join) do not go together");
  const bool lossy =
      options_.compression == Compression::kTopK || options_.compression == Compression::kPowerSgd;
  GYRE_USAGE_CHECK(!lossy || !options_.unevenInputs, "DistributedOptimizer: ", toString(options_.compression),
                   " compression and unevenInputs (join) do not go together");
  GYRE_USAGE_CHECK(
      !options_.autotune || (!options_.shardOptimizerState && !lossy && !options_.unevenInputs),
      "DistributedOptimizer: autotune tunes the buckets, which shardOptimizerState keeps as they are, "
      "top-k and PowerSGD do not use, and unevenInputs does not time alike on every rank");
  algorithm_ = options_.algorithm;
  auto& groups = optimizer_->param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (auto& param : groups[g].params()) {
      if (!param.requires_grad()) continue;
      Slot slot;
      slot.param = param;
      slot.group = g;
      slots_.push_back(std::move(slot));
    }
  }
  if (comm_->size() > 1) {
    // Before anything else, so that a rank whose model differs cannot fail alone and leave the
    // others waiting; and before anything is planned from the parameters: other parameters on
    // another rank would give it other buckets, and the collectives would disagree (a hang or a
    // garbage index rather than an error).
    std::vector<::torch::Tensor> params;
    for (const Slot& slot : slots_) params.push_back(slot.param);
    checkSameParameters(*comm_, params, {}, "DistributedOptimizer", options_.timeout);
  }
  for (auto& group : groups) {
    for (auto& param : group.params()) {
      GYRE_USAGE_CHECK(param.device().is_cpu(), "DistributedOptimizer: parameters must live on the CPU");
      GYRE_USAGE_CHECK(!param.is_sparse(), "DistributedOptimizer: sparse parameters are not supported");
      GYRE_USAGE_CHECK(!sharded_ || !param.requires_grad() || param.scalar_type() == ::torch::kFloat32,
                       "DistributedOptimizer: shardOptimizerState needs float32 parameters");
      GYRE_USAGE_CHECK(!lossy || !param.requires_grad() || param.scalar_type() == ::torch::kFloat32,
                       "DistributedOptimizer: ", toString(options_.compression),
                       " compression needs float32 parameters");
    }
  }
  // Made (and so checked) with one rank too: a bad rank fails before training, whatever the world.
  if (options_.compression == Compression::kTopK) compressor_ = detail::makeTopK(options_.topkRatio);
  if (options_.compression == Compression::kPowerSgd) {
    std::vector<std::vector<std::int64_t>> shapes;
    for (const Slot& slot : slots_) shapes.push_back(slot.param.sizes().vec());
    compressor_ = detail::makePowerSgd(options_.powerSgdRank, shapes);
  }
  if (comm_->size() > 1) {
    // The first layout: parameters in reverse, the order backward usually produces them.
    std::vector<std::size_t> order(slots_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
    layOut(planBuckets(gradientShapes(), order, options_.firstBucketCapBytes, options_.bucketCapBytes));
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& slot = slots_[i];
      slot.accumulator = ::torch::autograd::impl::grad_accumulator(slot.param);
      GYRE_USAGE_CHECK(slot.accumulator != nullptr, "DistributedOptimizer: parameter ", i, " is not a leaf");
      slot.hook = slot.accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i));
    }
    // Sharded, the buckets keep this layout: re-planning would move the shards and their state.
    if (sharded_) recordOrder_ = false;
  } else {
    // One rank: nothing to reduce, so no buckets and no hooks; the wrapped optimizer alone.
    recordOrder_ = false;
  }
  stepBegin_ = Clock::now();
}

DistributedOptimizer::Impl::~Impl() {
  for (Slot& slot : slots_)
    if (slot.accumulator) slot.accumulator->del_post_hook(slot.hook);
  // The communicator's thread may still write into the buckets: let it finish (each allreduce
  // is bounded by its time-out).
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (...) {  // reported, if anyone asked, by synchronize()
    }
  }
  // Parameters in shared memory get private storage again: without this optimizer, ranks that
  // went on writing them would write each other's.
  if (sharedParams_) {
    ::torch::NoGradGuard noGrad;
    for (Slot& slot : slots_) slot.param.set_data(slot.param.detach().clone());
  }
  // Gradients stop being views into the buckets, which go with this optimizer: a plain optimizer
  // (or a later DistributedOptimizer, as elastic training builds one per membership) can then
  // zero or replace them.
  for (Slot& slot : slots_) {
    ::torch::Tensor& grad = slot.param.mutable_grad();
    if (grad.defined()) grad = grad.detach().clone();
  }
}

std::vector<GradientSlot> DistributedOptimizer::Impl::gradientShapes() const {
  std::vector<GradientSlot> shapes;
  for (const Slot& slot : slots_)
    shapes.push_back(GradientSlot{slot.param.numel(), static_cast<std::size_t>(slot.param.element_size()),
                                  static_cast<int>(slot.param.scalar_type())});
  return shapes;
}

void DistributedOptimizer::Impl::layOut(const std::vector<BucketPlan>& plans) {
  std::vector<Bucket> buckets;
  ::torch::NoGradGuard noGrad;
  // Sharded, on one host: one copy of the parameters, in memory every rank maps (each bucket's
  // at a cache-line boundary), so the updated parts need no allgather.
  const std::int64_t world = comm_->size();
  std::size_t sharedOffset = 0;
  if (sharded_ && options_.shareParametersOnHost) {
    std::size_t bytes = 0;
    for (const BucketPlan& plan : plans) bytes += alignedFloatBytes(roundUp(plan.numel, world));
    sharedParams_ = comm_->allocateShared(bytes);
  }
  timesInBucket_ = options_.shareStepTimes && !sharded_ && !compressor_ && !options_.unevenInputs &&
                   !plans.empty() &&
                   static_cast<::torch::ScalarType>(plans.back().dtype) == ::torch::kFloat32;
  for (std::size_t b = 0; b < plans.size(); ++b) {
    const BucketPlan& plan = plans[b];
    Bucket bucket;
    const auto type = static_cast<::torch::ScalarType>(plan.dtype);
    bucket.used = plan.numel;
    const std::int64_t extra = timesInBucket_ && b + 1 == plans.size() ? world : 0;  // the ready times
    const std::int64_t numel = sharded_ ? roundUp(plan.numel, world) : plan.numel + extra;
    bucket.chunk = sharded_ ? numel / world : 0;
    bucket.flat = ::torch::zeros({numel}, ::torch::TensorOptions().dtype(type));
    if (sharded_ && sharedParams_) {
      auto* base = static_cast<std::uint8_t*>(sharedParams_->data()) + sharedOffset;
      sharedOffset += alignedFloatBytes(numel);
      bucket.params = ::torch::from_blob(
          base, {numel}, [keep = sharedParams_](void*) {}, ::torch::TensorOptions().dtype(type));
    } else if (sharded_) {
      bucket.params = ::torch::zeros({numel}, ::torch::TensorOptions().dtype(type));
    }
    bucket.wireType = toDataType(type);
    bucket.wire = bucket.flat;
    const bool halfWire = type == ::torch::kFloat32 && (options_.compression == Compression::kFp16 ||
                                                        options_.compression == Compression::kBf16);
    bucket.direct = plan.slots.size() == 1 && numel == plan.numel && !halfWire;
    if (halfWire) {
      const bool half = options_.compression == Compression::kFp16;
      bucket.wire =
          ::torch::empty({numel}, ::torch::TensorOptions().dtype(half ? ::torch::kHalf : ::torch::kBFloat16));
      bucket.wireType = half ? DataType::kFloat16 : DataType::kBFloat16;
    }
    bucket.wireBytes = static_cast<std::size_t>(bucket.wire.nbytes());
    if (shardGradients_) bucket.gradShard = ::torch::zeros({bucket.chunk}, ::torch::TensorOptions().dtype(type));
    bucket.slots = plan.slots;
    bucket.pending = plan.slots.size();
    for (std::size_t k = 0; k < plan.slots.size(); ++k) {
      Slot& slot = slots_[plan.slots[k]];
      slot.bucket = b;
      slot.offset = static_cast<std::size_t>(plan.offsets[k]);
      slot.view = bucket.flat.narrow(0, plan.offsets[k], slot.param.numel()).view(slot.param.sizes());
      if (sharded_) {  // the parameter's storage moves into the bucket; the tensor stays the same
        auto home = bucket.params.narrow(0, plan.offsets[k], slot.param.numel()).view(slot.param.sizes());
        if (!sharedParams_ || comm_->rank() == 0) home.copy_(slot.param);  // shared: rank 0's values
        slot.param.set_data(home);
      }
      if (slot.param.grad().defined()) slot.view.copy_(slot.param.grad());
      slot.param.mutable_grad() = slot.view;
    }
    buckets.push_back(std::move(bucket));
  }
  buckets_ = std::move(buckets);
  nextToIssue_ = 0;
  if (sharded_) buildShardOptimizer();
  if (sharedParams_) comm_->barrier();  // rank 0's values are in place before anyone reads them
}

void DistributedOptimizer::Impl::buildShardOptimizer() {
  // This rank's part of each bucket, cut where the parameter group changes: flat tensors over the
  // bucket's parameters with the matching stretch of the (reduce-scattered) gradients as grad.
  const std::int64_t rank = comm_->rank();
  std::vector<std::vector<::torch::Tensor>> groups(optimizer_->param_groups().size());
  for (Bucket& bucket : buckets_) {
    const std::int64_t lo = rank * bucket.chunk;
    const std::int64_t hi = std::min(lo + bucket.chunk, bucket.used);
    auto add = [&](std::size_t group, std::int64_t begin, std::int64_t end) {
      if (begin >= end) return;
      auto part = ::torch::from_blob(bucket.params.data_ptr<float>() + begin, {end - begin});
      bucket.parts.push_back({part, begin, end});
      groups[group].push_back(part);
    };
    std::int64_t runBegin = lo;
    std::size_t runGroup = 0;
    bool open = false;
    for (std::size_t index : bucket.slots) {
      const Slot& slot = slots_[index];
      const auto begin = std::max(lo, static_cast<std::int64_t>(slot.offset));
      const auto end = std::min(hi, static_cast<std::int64_t>(slot.offset) + slot.param.numel());
      if (begin >= end) continue;
      if (open && slot.group != runGroup) {
        add(runGroup, runBegin, begin);
        runBegin = begin;
      }
      if (!open) runBegin = begin;
      open = true;
      runGroup = slot.group;
    }
    if (open) add(runGroup, runBegin, hi);
    pointPartsAtGradients(bucket);
  }
  shard_ = makeShardOptimizer(*optimizer_, std::move(groups));
}

void DistributedOptimizer::Impl::pointPartsAtGradients(Bucket& bucket) {
  // ZeRO-2: into the kept chunk (which starts at this rank's rank · chunk); else into the bucket.
  float* base = shardGradients_ ? bucket.gradShard.data_ptr<float>() - comm_->rank() * bucket.chunk
                                : bucket.flat.data_ptr<float>();
  for (auto& part : bucket.parts)
    part.tensor.mutable_grad() = ::torch::from_blob(base + part.begin, {part.end - part.begin});
}

void DistributedOptimizer::Impl::materialize(Bucket& bucket) {
  ::torch::NoGradGuard noGrad;
  const std::int64_t numel = bucket.chunk * comm_->size();
  bucket.flat = ::torch::empty({numel}, bucket.gradShard.options());
  bucket.flat.narrow(0, bucket.used, numel - bucket.used).zero_();  // the padding
  bucket.wire = bucket.flat;
  for (std::size_t index : bucket.slots) {
    Slot& slot = slots_[index];
    slot.view = bucket.flat.narrow(0, static_cast<std::int64_t>(slot.offset), slot.param.numel()).view(slot.param.sizes());
  }
}

void DistributedOptimizer::Impl::keepChunkAndRelease(Bucket& bucket) {
  ::torch::NoGradGuard noGrad;
  bucket.gradShard.copy_(bucket.flat.narrow(0, comm_->rank() * bucket.chunk, bucket.chunk));
  for (std::size_t index : bucket.slots) {
    Slot& slot = slots_[index];
    slot.view = ::torch::Tensor();
    slot.param.mutable_grad().reset();
  }
  bucket.flat = bucket.wire = ::torch::Tensor();
}

void DistributedOptimizer::Impl::releaseReducedBuckets() {
  for (std::size_t b = 0; b < nextToIssue_; ++b) {
    Bucket& bucket = buckets_[b];
    if (bucket.flat.defined() && bucket.work && bucket.work->isCompleted() && !bucket.work->exception())
      keepChunkAndRelease(bucket);
  }
}

void DistributedOptimizer::Impl::adoptGradient(Slot& slot, Bucket& bucket) {
  // The bucket becomes the gradient autograd produced (contiguous and of the parameter's type;
  // zeros when there is none), so nothing is copied.
  ::torch::Tensor grad = slot.param.grad();
  if (grad.defined() && slot.view.defined() && grad.data_ptr() == slot.view.data_ptr()) return;
  ::torch::NoGradGuard noGrad;
  if (!grad.defined()) {
    grad = ::torch::zeros_like(slot.param, ::torch::MemoryFormat::Contiguous);
  } else if (!grad.is_contiguous() || grad.scalar_type() != slot.param.scalar_type() || grad.sizes() != slot.param.sizes()) {
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
  if (grad.defined() && grad.data_ptr() == slot.view.data_ptr()) return;
  ::torch::NoGradGuard noGrad;
  if (grad.defined()) {
    slot.view.copy_(grad);
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

void DistributedOptimizer::Impl::issue(Bucket& bucket, bool here) {
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

void DistributedOptimizer::Impl::recordReduction(StepTiming& timing, const Bucket& bucket, Clock::time_point begin,
                                                 Clock::time_point end) {
  ++timing.buckets;
  // The gradients' bytes: not the ready times that travel in the last bucket (shareStepTimes).
  std::size_t bytes = bucket.wireBytes;
  if (timesInBucket_ && &bucket == &buckets_.back())
    bytes -= static_cast<std::size_t>(comm_->size()) * static_cast<std::size_t>(bucket.wire.element_size());
  recordTransfer(timing, sharded_ ? "reduce-scatter" : "allreduce", bucket, bytes, begin, end);
}

void DistributedOptimizer::Impl::recordTransfer(StepTiming& timing, const char* what, const Bucket& bucket,
                                                std::size_t bytes, Clock::time_point begin, Clock::time_point end) {
  timing.communicate += seconds(end - begin);
  timing.bytes += bytes;
  if (options_.timeline)
    options_.timeline->span(Timeline::Track::kCommunication, what, begin, end,
                            "\"bytes\":" + std::to_string(bytes) + ",\"bucket\":" +
                                std::to_string(&bucket - buckets_.data()));
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
  const auto begin = Clock::now();
  const double ready = seconds(begin - stepBegin_);
  StepTiming timing;
  timing.steps = 1;
  if (comm_->size() > 1) {
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
  firstReady_ = lastReady_ = Clock::time_point{};
}

StepTiming DistributedOptimizer::Impl::allgather(::torch::Tensor Bucket::*buffer, const char* what) {
  // Every rank's part of each bucket's `buffer`, in place, on this thread (nothing else is in
  // flight: no hand-off to the communicator's); the time counts as waiting.
  const auto begin = Clock::now();
  CollectiveOptions o;
  o.timeout = options_.timeout;
  const std::size_t rank = static_cast<std::size_t>(comm_->rank());
  StepTiming timing;
  for (Bucket& bucket : buckets_) {
    float* data = (bucket.*buffer).data_ptr<float>();
    const auto gatherBegin = Clock::now();
    comm_->allgather(data + rank * static_cast<std::size_t>(bucket.chunk), data,
                     static_cast<std::size_t>(bucket.chunk), o);
    recordTransfer(timing, what, bucket, static_cast<std::size_t>((bucket.*buffer).nbytes()), gatherBegin,
                   Clock::now());
  }
  const auto end = Clock::now();
  timing.wait = seconds(end - begin);
  if (options_.timeline) options_.timeline->span(Timeline::Track::kCompute, "wait", begin, end);
  return timing;
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
    if (options_.timeline) options_.timeline->span(Timeline::Track::kCompute, "wait", barrierBegin, barrierEnd);
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
  GYRE_USAGE_CHECK(options_.unevenInputs, "join() needs DistributedOptimizerOptions::unevenInputs = true on every rank");
  for (;;) {
    zeroGrad();
    synchronize(false);
    if (activeRanks_ == 0) return;  // every rank has joined
    optimizer_->step();            // the same averaged update as the ranks still training
  }
}

DistributedOptimizer::DistributedOptimizer(std::shared_ptr<Communicator> comm,
                                           std::shared_ptr<::torch::optim::Optimizer> optimizer,
                                           DistributedOptimizerOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(optimizer), std::move(options))) {}

DistributedOptimizer::~DistributedOptimizer() = default;

void DistributedOptimizer::zeroGrad() { impl_->zeroGrad(); }
void DistributedOptimizer::step() { impl_->step(); }
void DistributedOptimizer::synchronize() { impl_->synchronize(true); }
void DistributedOptimizer::join() { impl_->join(); }

DistributedOptimizer::NoSyncGuard::NoSyncGuard(DistributedOptimizer& owner) : owner_(owner) {
  MutexLock lock(owner_.impl_->mu_);
  owner_.impl_->syncEnabled_ = false;
}

DistributedOptimizer::NoSyncGuard::~NoSyncGuard() {
  MutexLock lock(owner_.impl_->mu_);
  owner_.impl_->syncEnabled_ = true;
}

const StepTiming& DistributedOptimizer::lastStep() const { return impl_->last_; }
const StepTiming& DistributedOptimizer::totals() const { return impl_->totals_; }

void DistributedOptimizer::resetTiming() {
  MutexLock lock(impl_->mu_);
  impl_->totals_ = StepTiming{};
  impl_->stepBegin_ = Clock::now();
}

::torch::optim::Optimizer& DistributedOptimizer::optimizer() { return *impl_->optimizer_; }
::torch::optim::Optimizer& DistributedOptimizer::stateOptimizer() {
  return impl_->sharded_ ? *impl_->shard_.optimizer : *impl_->optimizer_;
}
Communicator& DistributedOptimizer::communicator() { return *impl_->comm_; }
const DistributedOptimizerOptions& DistributedOptimizer::options() const { return impl_->options_; }

std::vector<double> DistributedOptimizer::stepTimes() const {
  MutexLock lock(impl_->mu_);
  return impl_->stepTimes_;
}

std::optional<AutotuneResult> DistributedOptimizer::autotuned() const {
  MutexLock lock(impl_->mu_);
  return impl_->autotuned_;
}

std::vector<std::size_t> DistributedOptimizer::bucketBytes() const {
  MutexLock lock(impl_->mu_);
  std::vector<std::size_t> bytes;
  for (const auto& bucket : impl_->buckets_) bytes.push_back(bucket.wireBytes);
  return bytes;
}

std::size_t DistributedOptimizer::stateBytes() const {
  MutexLock lock(impl_->mu_);
  std::size_t bytes = 0;
  auto add = [&bytes](const ::torch::Tensor& t) {
    if (t.defined()) bytes += static_cast<std::size_t>(t.nbytes());
  };
  for (const auto& slot : impl_->slots_) add(slot.param);
  if (impl_->buckets_.empty()) {  // one rank: the gradients autograd left
    for (const auto& slot : impl_->slots_) add(slot.param.grad());
  }
  for (const auto& bucket : impl_->buckets_) {
    add(bucket.flat);
    if (bucket.wire.defined() && bucket.wire.data_ptr() != bucket.flat.data_ptr()) add(bucket.wire);
    add(bucket.gradShard);
  }
  return bytes + optimizerStateTensorBytes(impl_->sharded_ ? *impl_->shard_.optimizer : *impl_->optimizer_);
}

}  // namespace gyre::torch
