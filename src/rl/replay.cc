#include "gyre/rl/replay.h"

#include <algorithm>
#include <cmath>

#include "gyre/errors.h"

namespace gyre::rl {

void Transitions::append(const Transitions& other, std::size_t i) {
  const auto dim = static_cast<std::size_t>(observationSize);
  const auto from = other.observations.begin() + static_cast<std::ptrdiff_t>(i * dim);
  observations.insert(observations.end(), from, from + static_cast<std::ptrdiff_t>(dim));
  const auto next = other.nextObservations.begin() + static_cast<std::ptrdiff_t>(i * dim);
  nextObservations.insert(nextObservations.end(), next, next + static_cast<std::ptrdiff_t>(dim));
  actions.push_back(other.actions[i]);
  returns.push_back(other.returns[i]);
  discounts.push_back(other.discounts[i]);
}

PrioritizedReplay::PrioritizedReplay(std::size_t capacity, double alpha, std::uint64_t seed)
    : capacity_(capacity), leaves_(1), alpha_(alpha), rng_(seed) {
  if (capacity == 0) throw InvalidArgument("a replay buffer needs a capacity of at least 1");
  if (!(alpha >= 0 && alpha <= 1)) throw InvalidArgument("the replay's alpha must be in [0, 1]");
  while (leaves_ < capacity_) leaves_ *= 2;
  tree_.assign(2 * leaves_, 0.0);
}

void PrioritizedReplay::set(std::size_t slot, double priority) {
  std::size_t node = leaves_ + slot;
  const double delta = std::pow(priority, alpha_) - tree_[node];
  for (; node >= 1; node /= 2) tree_[node] += delta;
}

std::size_t PrioritizedReplay::find(double mass) const {
  std::size_t node = 1;
  while (node < leaves_) {
    const std::size_t left = 2 * node;
    if (mass < tree_[left] || tree_[left + 1] <= 0) {
      node = left;
    } else {
      mass -= tree_[left];
      node = left + 1;
    }
  }
  return std::min(node - leaves_, size_ - 1);
}

void PrioritizedReplay::add(const Transitions& t, const std::vector<float>& priorities) {
  const std::size_t n = t.size();
  const auto dim = static_cast<std::size_t>(t.observationSize);
  if (t.observations.size() != n * dim || t.nextObservations.size() != n * dim || t.returns.size() != n ||
      t.discounts.size() != n)
    throw InvalidArgument("transitions whose columns differ in length");
  if (!priorities.empty() && priorities.size() != n)
    throw InvalidArgument("transitions: " + std::to_string(priorities.size()) + " priorities for " +
                          std::to_string(n) + " transitions");
  if (data_.observationSize == 0) data_.observationSize = t.observationSize;
  if (t.observationSize != data_.observationSize)
    throw InvalidArgument("transitions of observations of " + std::to_string(t.observationSize) +
                          " values into a replay of " + std::to_string(data_.observationSize));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slot = next_;
    if (size_ < capacity_) {
      data_.append(t, i);
      ++size_;
    } else {
      std::copy_n(t.observations.begin() + static_cast<std::ptrdiff_t>(i * dim), dim,
                  data_.observations.begin() + static_cast<std::ptrdiff_t>(slot * dim));
      std::copy_n(t.nextObservations.begin() + static_cast<std::ptrdiff_t>(i * dim), dim,
                  data_.nextObservations.begin() + static_cast<std::ptrdiff_t>(slot * dim));
      data_.actions[slot] = t.actions[i];
      data_.returns[slot] = t.returns[i];
      data_.discounts[slot] = t.discounts[i];
    }
    double p = priorities.empty() ? maxPriority_ : std::max(1e-6, static_cast<double>(priorities[i]));
    if (!std::isfinite(p)) p = maxPriority_;
    maxPriority_ = std::max(maxPriority_, p);
    set(slot, p);
    next_ = (next_ + 1) % capacity_;
    ++added_;
  }
}

ReplaySample PrioritizedReplay::sample(std::size_t k, double beta) {
  if (size_ == 0) throw InvalidArgument("sample from an empty replay buffer");
  ReplaySample out;
  out.batch.observationSize = data_.observationSize;
  const double total = tree_[1];
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (std::size_t j = 0; j < k; ++j) {
    // Stratified: one draw from each of k equal slices of the mass.
    const double mass = (static_cast<double>(j) + uniform(rng_)) * total / static_cast<double>(k);
    const std::size_t slot = find(std::min(mass, std::nextafter(total, 0.0)));
    out.batch.append(data_, slot);
    out.indices.push_back(static_cast<std::int64_t>(slot));
    const double p = tree_[leaves_ + slot] / total;
    out.weights.push_back(static_cast<float>(std::pow(static_cast<double>(size_) * p, -beta)));
  }
  const float largest = *std::max_element(out.weights.begin(), out.weights.end());
  for (float& w : out.weights) w /= largest;
  return out;
}

void PrioritizedReplay::updatePriorities(const std::vector<std::int64_t>& indices,
                                         const std::vector<float>& priorities) {
  if (indices.size() != priorities.size())
    throw InvalidArgument("updatePriorities: " + std::to_string(priorities.size()) + " priorities for " +
                          std::to_string(indices.size()) + " places");
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || static_cast<std::size_t>(indices[i]) >= size_)
      throw InvalidArgument("updatePriorities: place " + std::to_string(indices[i]) + " is outside the " +
                            std::to_string(size_) + " stored transitions");
    double p = std::max(1e-6, static_cast<double>(priorities[i]));
    if (!std::isfinite(p)) continue;
    maxPriority_ = std::max(maxPriority_, p);
    set(static_cast<std::size_t>(indices[i]), p);
  }
}

}  // namespace gyre::rl
