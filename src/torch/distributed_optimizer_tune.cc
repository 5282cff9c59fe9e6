// DistributedOptimizerOptions::autotune: the bucket cap and the allreduce algorithm, tuned during
// the first steps (torch/fusion_tuner.h has the search).
#include <utility>

#include "common/check.h"
#include "torch/distributed_optimizer_impl.h"

namespace gyre::torch {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

void DistributedOptimizer::Impl::startTuning() {
  // Caps that lay the buckets out differently: of those giving the same buckets, the first.
  std::vector<std::size_t> candidates = {options_.bucketCapBytes, 1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};
  std::vector<std::size_t> caps;
  std::vector<std::vector<std::vector<std::size_t>>> layouts;
  const std::vector<GradientSlot> shapes = gradientShapes();
  for (std::size_t cap : candidates) {
    std::vector<std::vector<std::size_t>> layout;
    for (const BucketPlan& plan : planBucketsByReadyTime(shapes, plannedOrder_, plannedReady_, cap))
      layout.push_back(plan.slots);
    if (std::find(layouts.begin(), layouts.end(), layout) != layouts.end()) continue;
    layouts.push_back(std::move(layout));
    caps.push_back(cap);
  }
  tuner_ = std::make_unique<detail::FusionTuner>(
      caps, options_.algorithm,
      std::vector<AllreduceAlgorithm>{AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing,
                                      AllreduceAlgorithm::kHalvingDoubling});
  algorithm_ = tuner_->current().algorithm;
  planAgain(tuner_->current().capBytes);
}

void DistributedOptimizer::Impl::tuneStep(Clock::time_point now) {
  if (tuner_->done()) return;
  const Clock::time_point previous = std::exchange(tuneMark_, now);
  if (previous == Clock::time_point{}) return;  // the planning step: the first trial starts after it
  ++tunedSteps_;
  if (!tuner_->record(std::chrono::duration<double>(now - previous).count())) return;
  double agreed = tuner_->trialSeconds();
  AllreduceOptions o;
  o.dtype = DataType::kFloat64;
  o.op = ReduceOp::kMax;
  o.timeout = options_.timeout;
  comm_->allreduce(&agreed, &agreed, 1, o);
  tuner_->finishTrial(agreed);
  const detail::FusionChoice& next = tuner_->current();
  algorithm_ = next.algorithm;
  planAgain(next.capBytes);
  if (!tuner_->done()) return;
  AutotuneResult result;
  result.bucketCapBytes = next.capBytes;
  result.algorithm = algorithm_;
  result.stepSeconds = tuner_->best().stepSeconds;
  result.trials = static_cast<int>(tuner_->trials().size());
  result.steps = tunedSteps_;
  result.summary = tuner_->summary();
  autotuned_ = std::move(result);
}

}  // namespace gyre::torch
