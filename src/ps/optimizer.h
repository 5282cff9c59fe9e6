// The optimizer a server applies to one slice, with PyTorch's semantics (see OptimizerOptions).
// Deterministic: the same state, gradient and learning rate give bit-identical results, which
// is what lets a backup replay its primary's updates exactly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gyre/ps.h"

namespace gyre::ps {

struct SliceOptimizerState {
  std::vector<float> momentum;  // sgd with momentum; empty until the first update
  std::vector<float> expAvg, expAvgSq;  // adam
  std::int64_t steps = 0;
};

// params -= the optimizer's step for `grad` (already averaged) at learning rate `lr`.
void applyUpdate(const OptimizerOptions& config, float lr, std::span<float> params,
                 std::span<const float> grad, SliceOptimizerState& state);

}  // namespace gyre::ps
