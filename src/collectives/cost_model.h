// The cost model that `auto` uses to choose an allreduce algorithm. Its terms are measured on
// the communicator itself (calibrate), so the choice follows the real transport, the real
// memory system and the real oversubscription of cores: α-β-γ terms, and timings of every
// algorithm itself at two sizes, which anchor the formulas. GYRE_COST_MODEL replaces the
// measurement with α-β-γ terms ("alpha_us,beta_GBps,gamma_GBps", see parseCostModel). The
// formulas are written out in cost_model.cc and docs/algorithms.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gyre/types.h"

namespace gyre::collectives {

struct Context;

// The allreduce variants the model times: halving-doubling runs one of two.
enum class AllreduceVariant : std::uint8_t { kNaive, kRing, kRecursiveDoubling, kRabenseifner, kTree };
inline constexpr std::size_t kAllreduceVariants = 5;

struct CostModel {
  bool calibrated = false;
  double alpha = 0;  // seconds per message (latency)
  double beta = 0;   // seconds per byte moved between two ranks
  double gamma = 0;  // seconds per byte reduced

  // Seconds of one allreduce of each variant (indexed by AllreduceVariant) of kSmallBytes and of
  // kMidBytes, timed by calibrate() on `measuredSize` ranks (0: not measured, the α-β-γ
  // formulas alone decide). Between the two sizes predict() interpolates; below, it takes the
  // small time; above, the mid time plus the growth the formula predicts beyond kMidBytes (where
  // choose() only considers the bandwidth-optimal ring and halving-doubling).
  static constexpr std::size_t kSmallBytes = 4 * 1024;
  static constexpr std::size_t kMidBytes = 64 * 1024;
  // The two bandwidth-optimal variants (ring, Rabenseifner) are also timed at kLargeBytes: their
  // formulas have the same bandwidth term, so only a measurement tells which pipelines better on
  // this machine. Beyond kMidBytes predict() interpolates towards that time, and beyond
  // kLargeBytes adds the formula's growth to it. Zero for the variants not timed there.
  static constexpr std::size_t kLargeBytes = 4 * 1024 * 1024;
  std::array<double, kAllreduceVariants> atSmall{};
  std::array<double, kAllreduceVariants> atMid{};
  std::array<double, kAllreduceVariants> atLarge{};
  int measuredSize = 0;

  // Terms of a typical shared-memory host, used while a model is not calibrated.
  static CostModel typical();

  // Predicted seconds of one allreduce of `bytes` over `p` ranks: anchored on the timings when
  // they were measured on p ranks, else from the α-β-γ formulas. kHalvingDoubling predicts the variant
  // that allreduceHalvingDoubling will run (see useRecursiveDoubling); kAuto predicts the
  // algorithm choose() picks.
  double predict(AllreduceAlgorithm algorithm, std::size_t bytes, int p) const;
  double predict(AllreduceVariant variant, std::size_t bytes, int p) const;
  // The algorithm with the least predicted time (kAuto never returned). Ties go to, in order:
  // ring, halving-doubling, tree, naive. An uncalibrated model decides with typical() terms.
  AllreduceAlgorithm choose(std::size_t bytes, int p) const;
};

// Whether allreduceHalvingDoubling exchanges the whole vector by recursive doubling (always when
// count is below the largest power of two <= p; otherwise when the model, or typical() while it
// is not calibrated, predicts it faster than Rabenseifner's reduce-scatter + allgather). Every
// rank holds the same model (calibrate agrees on it), so every rank decides the same.
bool useRecursiveDoubling(const CostModel& model, std::size_t bytes, std::size_t count, int p);

// Measures alpha, beta, gamma and the per-variant timings (collective: every rank of c calls it at
// the same point), then agrees on the largest value of each measurement across ranks, so every
// rank chooses the same algorithm. Stores the result in c.cost. Takes a few tens of ms at most.
void calibrate(Context& c);

// Parses GYRE_COST_MODEL's "alpha_us,beta_GBps,gamma_GBps" (e.g. "5,8,12") into a calibrated
// model without timings; throws InvalidArgument on anything else.
CostModel parseCostModel(std::string_view spec);

}  // namespace gyre::collectives
