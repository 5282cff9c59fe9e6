#include "gyre/torch/lr.h"

#include <cmath>
#include <string>

#include "common/check.h"
#include "gyre/errors.h"

namespace gyre::torch {

std::string_view toString(LrScaling scaling) {
  switch (scaling) {
    case LrScaling::kNone: return "none";
    case LrScaling::kLinear: return "linear";
    case LrScaling::kSqrt: return "sqrt";
  }
  return "?";
}

LrScaling parseLrScaling(std::string_view name) {
  if (name == "none") return LrScaling::kNone;
  if (name == "linear") return LrScaling::kLinear;
  if (name == "sqrt") return LrScaling::kSqrt;
  throw InvalidArgument("unknown learning-rate scaling '" + std::string(name) + "' (none, linear, sqrt)");
}

double scaleLearningRate(double base, int ranks, LrScaling scaling) {
  GYRE_USAGE_CHECK(ranks >= 1, "scaleLearningRate: ranks must be at least 1, not ", ranks);
  switch (scaling) {
    case LrScaling::kNone: return base;
    case LrScaling::kLinear: return base * ranks;
    case LrScaling::kSqrt: return base * std::sqrt(static_cast<double>(ranks));
  }
  return base;
}

WarmupSchedule::WarmupSchedule(double start, double target, std::int64_t warmupSteps)
    : start_(start), target_(target), warmupSteps_(warmupSteps) {
  GYRE_USAGE_CHECK(warmupSteps >= 0, "warm-up steps must not be negative, not ", warmupSteps);
}

double WarmupSchedule::at(std::int64_t step) const {
  if (step >= warmupSteps_) return target_;
  if (step <= 0) return start_;
  const double t = static_cast<double>(step) / static_cast<double>(warmupSteps_);
  return start_ + (target_ - start_) * t;
}

void setLearningRate(::torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace gyre::torch
