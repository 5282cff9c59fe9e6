// Prioritized experience replay (Schaul et al. 2016, proportional variant) for gyre::rl's learners:
// a ring of transitions with a sum tree over their priorities^α, so that sampling k of them in
// proportion to priority, and updating the priorities of those sampled, cost O(k log n).
// libtorch-free; the transitions travel between gyre::rt actors as MessagePack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "gyre/rt/serialize.h"

namespace gyre::rl {

// Transitions column by column: the observation where an action was taken, the action, the
// discounted sum of the n rewards that followed (n-step return), the discount of the bootstrap
// value (γ^n, or 0 when the episode terminated within those steps) and the observation n steps
// later, where the bootstrap value is read.
struct Transitions {
  std::int32_t observationSize = 0;
  std::vector<float> observations;  // size() × observationSize
  std::vector<std::int32_t> actions;
  std::vector<float> returns;
  std::vector<float> discounts;
  std::vector<float> nextObservations;  // size() × observationSize

  std::size_t size() const { return actions.size(); }
  // Appends transition i of `other` (of the same observationSize).
  void append(const Transitions& other, std::size_t i);

  MSGPACK_DEFINE(observationSize, observations, actions, returns, discounts, nextObservations)
};

// What sample() drew: the transitions, their places in the buffer (for updatePriorities) and
// their importance-sampling weights (N·P(i))^-β, divided by the largest of the sample's.
struct ReplaySample {
  Transitions batch;
  std::vector<std::int64_t> indices;
  std::vector<float> weights;

  MSGPACK_DEFINE(batch, indices, weights)
};

class PrioritizedReplay {
 public:
  // capacity: transitions kept (the oldest are overwritten); alpha: how much priority counts (0:
  // uniform); seed: the sampling generator's.
  PrioritizedReplay(std::size_t capacity, double alpha, std::uint64_t seed);

  // Adds the transitions with their priorities (|TD error|, as the actors computed them; one per
  // transition, or none: then the largest priority seen so far).
  void add(const Transitions& t, const std::vector<float>& priorities);
  // k transitions drawn with probability priority^α / Σ priority^α, with replacement; the buffer
  // must not be empty.
  ReplaySample sample(std::size_t k, double beta);
  // New priorities for sampled places; a place since overwritten is left alone (`stamps` of
  // sample() time are not kept, so the caller updates promptly; an update to a newer transition
  // only sets a fresh transition's priority early).
  void updatePriorities(const std::vector<std::int64_t>& indices, const std::vector<float>& priorities);

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::int64_t added() const { return added_; }
  double total() const { return tree_[1]; }  // Σ priority^α

 private:
  void set(std::size_t slot, double priority);
  std::size_t find(double mass) const;  // the slot where the prefix sum of priority^α passes mass

  std::size_t capacity_;
  std::size_t leaves_;  // a power of two ≥ capacity
  double alpha_;
  std::mt19937_64 rng_;
  std::vector<double> tree_;  // tree_[1] the root; leaves at [leaves_, 2·leaves_)
  double maxPriority_ = 1.0;
  std::size_t next_ = 0;
  std::size_t size_ = 0;
  std::int64_t added_ = 0;
  Transitions data_;  // capacity_ rows, filled as they come
};

}  // namespace gyre::rl
