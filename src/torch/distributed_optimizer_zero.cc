// DistributedOptimizer's sharded step, ZeRO stages 1 and 2 (Rajbhandari et al., "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models", 2020), on the buckets the hot path
// reduce-scatters:
//   stage 1 (shardOptimizerState): each rank steps the optimizer on its 1/N of every bucket (its
//     part of the parameters, with the matching part of the averaged gradients), so it holds 1/N
//     of the optimizer's state; then an allgather of the parameters gives every rank the whole
//     model. Bytes on the wire: the reduce-scatter's and the allgather's, (N-1)/N each, as one
//     allreduce's.
//   stage 2 (shardGradients): as soon as a bucket's reduce-scatter is done, the rank keeps only
//     its chunk of the reduced gradients and releases the bucket, so it holds 1/N of them too.
// On one host the ranks share one copy of the parameters (sharedParams_) and the allgather
// becomes a barrier.
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_map>

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

FlatLayout DistributedOptimizer::stateLayout(const std::vector<::torch::Tensor>& params) {
  if (!impl_->sharded_) return {};
  const std::unordered_map<const void*, std::size_t> index = parameterIndex(params);
  MutexLock lock(impl_->mu_);
  // Each part's pieces, found by its tensor: the shard optimizer holds them group by group.
  std::unordered_map<const void*, FlatTensor> byPart;
  for (const Impl::Bucket& bucket : impl_->buckets_) {
    std::vector<std::int64_t> numels, offsets;
    std::vector<std::size_t> indices;
    for (std::size_t s : bucket.slots) {
      const Impl::Slot& slot = impl_->slots_[s];
      const auto it = index.find(slot.param.unsafeGetTensorImpl());
      GYRE_ARG_CHECK(it != index.end(), "stateLayout: a parameter of the optimizer is not among the parameters given");
      numels.push_back(slot.param.numel());
      offsets.push_back(static_cast<std::int64_t>(slot.offset));
      indices.push_back(it->second);
    }
    for (const auto& part : bucket.parts)
      byPart[part.tensor.unsafeGetTensorImpl()] = piecesOfRange(numels, offsets, indices, part.begin, part.end);
  }
  FlatLayout layout;
  for (const ::torch::Tensor& flat : optimizerParameters(*impl_->shard_.optimizer))
    layout.push_back(byPart.at(flat.unsafeGetTensorImpl()));
  return layout;
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
    slot.view = bucket.flat.narrow(0, static_cast<std::int64_t>(slot.offset), slot.param.numel())
                    .view(slot.param.sizes());
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

}  // namespace gyre::torch
