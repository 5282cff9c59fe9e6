// Which samples each rank trains on: a disjoint shard of one shuffled order per epoch.
#pragma once

#include <cstdint>
#include <vector>

namespace gyre::torch {

struct DistributedSamplerOptions {
  bool shuffle = true;
  std::uint64_t seed = 0;  // the same on every rank
  // false: pad the order by repeating its first samples, so every rank gets ceil(n / ranks);
  // true: drop the tail, so every rank gets floor(n / ranks). Either way all ranks run the same
  // number of steps.
  bool dropLast = false;
};

// As PyTorch's DistributedSampler: epoch e's order is a permutation seeded by (seed, e), the same
// on every rank; rank r takes positions r, r + ranks, r + 2 ranks, ... of it. With one rank and
// global batch B, the samples of step s are positions [sB, (s+1)B), the same samples that
// `ranks` ranks with batch B / ranks train on together.
//
// Thread-safety: none needed; a sampler is a value.
class DistributedSampler {
 public:
  // Throws InvalidArgument unless 0 <= rank < ranks and datasetSize >= 0.
  DistributedSampler(std::int64_t datasetSize, int ranks, int rank, DistributedSamplerOptions options = {});

  void setEpoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }

  // This rank's sample indices for the current epoch, in order.
  std::vector<std::int64_t> indices() const;
  // How many samples each rank gets per epoch.
  std::int64_t samplesPerRank() const;
  // Steps per epoch with `batch` samples per rank (a partial last batch is dropped when
  // dropLastBatch, kept otherwise); the same on every rank.
  std::int64_t steps(std::int64_t batch, bool dropLastBatch = true) const;

 private:
  std::int64_t size_;
  int ranks_;
  int rank_;
  DistributedSamplerOptions options_;
  std::int64_t epoch_ = 0;
};

}  // namespace gyre::torch
