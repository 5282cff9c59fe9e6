// The alpha-beta-gamma cost model that `auto` uses to choose an algorithm. Its terms are
// measured on the communicator itself (calibrate), so the choice follows the real transport,
// the real memory system and the real oversubscription of cores; GYRE_COST_MODEL overrides
// them ("alpha_us,beta_GBps,gamma_GBps").
#pragma once

#include <cstddef>

#include "gyre/types.h"

namespace gyre::collectives {

struct Context;

struct CostModel {
  bool calibrated = false;
  double alpha = 0;  // seconds per message (latency)
  double beta = 0;   // seconds per byte moved between two ranks
  double gamma = 0;  // seconds per byte reduced

  // Predicted seconds of one allreduce of `bytes` over `p` ranks.
  double predict(AllreduceAlgorithm algorithm, std::size_t bytes, int p) const;
  // The algorithm with the least predicted time (kAuto never returned).
  AllreduceAlgorithm choose(std::size_t bytes, int p) const;
};

// Measures alpha, beta and gamma (collective: every rank of c calls it at the same point), then
// agrees on the largest value of each across ranks, so every rank chooses the same algorithm.
void calibrate(Context& c);

}  // namespace gyre::collectives
