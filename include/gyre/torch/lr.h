// Learning-rate helpers for data-parallel training.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string_view>

namespace gyre::torch {

// How the learning rate grows with the number of ranks when each rank keeps its batch (so the
// global batch grows): linearly (Goyal et al., with warm-up) or with the square root.
enum class LrScaling { kNone, kLinear, kSqrt };
std::string_view toString(LrScaling scaling);
// "none", "linear", "sqrt"; throws InvalidArgument otherwise.
LrScaling parseLrScaling(std::string_view name);

// base * factor(ranks): 1, ranks or sqrt(ranks).
double scaleLearningRate(double base, int ranks, LrScaling scaling);

// Linear warm-up from `start` to `target` over `warmupSteps` steps, then `target`.
class WarmupSchedule {
 public:
  WarmupSchedule(double start, double target, std::int64_t warmupSteps);
  double at(std::int64_t step) const;

 private:
  double start_;
  double target_;
  std::int64_t warmupSteps_;
};

// Sets the learning rate of every parameter group.
void setLearningRate(::torch::optim::Optimizer& optimizer, double lr);

}  // namespace gyre::torch
