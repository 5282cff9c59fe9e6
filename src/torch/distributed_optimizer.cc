// DistributedOptimizer (include/gyre/torch/distributed_optimizer.h): the public class over its
// Impl (distributed_optimizer_impl.h), and the Impl's set-up: its checks, the parameters' slots,
// the gradient hooks and the buckets' layout. The hot path is in distributed_optimizer_sync.cc,
// ZeRO's sharded step in distributed_optimizer_zero.cc, the autotuner in
// distributed_optimizer_tune.cc.
#include "gyre/torch/distributed_optimizer.h"

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
    std::vector<::torch::Tensor> params;
    for (const Slot& slot : slots_) params.push_back(slot.param);
    hooks_.install(
        params, [this](std::size_t index) { onGradientReady(index); }, "DistributedOptimizer");
    // Sharded, the buckets keep this layout: re-planning would move the shards and their state.
    if (sharded_) recordOrder_ = false;
  } else {
    // One rank: nothing to reduce, so no buckets and no hooks; the wrapped optimizer alone.
    recordOrder_ = false;
  }
  stepBegin_ = Clock::now();
}

DistributedOptimizer::Impl::~Impl() {
  hooks_.remove();
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

DistributedOptimizer::DistributedOptimizer(std::shared_ptr<Communicator> comm,
                                           std::shared_ptr<::torch::optim::Optimizer> optimizer,
                                           DistributedOptimizerOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(optimizer), std::move(options))) {}

DistributedOptimizer::~DistributedOptimizer() = default;

void DistributedOptimizer::zeroGrad() { impl_->zeroGrad(); }
void DistributedOptimizer::step() { impl_->step(); }
void DistributedOptimizer::synchronize() { impl_->synchronize(true); }

void DistributedOptimizer::reduceAsJoined() { impl_->reduceAsJoined(); }
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
