#include "gyre/torch/sampler.h"

#include <numeric>
#include <random>

#include "common/check.h"

namespace gyre::torch {

DistributedSampler::DistributedSampler(std::int64_t datasetSize, int ranks, int rank, DistributedSamplerOptions options)
    : size_(datasetSize), ranks_(ranks), rank_(rank), options_(options) {
  GYRE_USAGE_CHECK(datasetSize >= 0, "DistributedSampler: data set size must not be negative, not ", datasetSize);
  GYRE_USAGE_CHECK(ranks >= 1, "DistributedSampler: ranks must be at least 1, not ", ranks);
  GYRE_USAGE_CHECK(rank >= 0 && rank < ranks, "DistributedSampler: rank ", rank, " is not in [0, ", ranks, ")");
}

std::int64_t DistributedSampler::samplesPerRank() const {
  if (options_.dropLast) return size_ / ranks_;
  return (size_ + ranks_ - 1) / ranks_;
}

std::int64_t DistributedSampler::steps(std::int64_t batch, bool dropLastBatch) const {
  GYRE_USAGE_CHECK(batch >= 1, "DistributedSampler: batch must be at least 1, not ", batch);
  const std::int64_t n = samplesPerRank();
  return dropLastBatch ? n / batch : (n + batch - 1) / batch;
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    // Fisher-Yates with our own draws: std::shuffle's sequence is not fixed by the standard.
    std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch_));
    for (std::size_t i = order.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(rng() % i);
      std::swap(order[i - 1], order[j]);
    }
  }
  const std::int64_t total = samplesPerRank() * ranks_;
  for (std::int64_t i = size_; i < total && size_ > 0; ++i) order.push_back(order[static_cast<std::size_t>(i % size_)]);
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(samplesPerRank()));
  for (std::int64_t i = rank_; i < total; i += ranks_) mine.push_back(order[static_cast<std::size_t>(i)]);
  return mine;
}

}  // namespace gyre::torch
