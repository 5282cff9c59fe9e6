// Lossy gradient compression with error feedback, for DistributedOptimizer's Compression::kTopK
// and kPowerSgd. Each keeps, per rank, what its compression left out of the gradients
// (the error) and adds it to the next step's gradients before compressing, so nothing is lost
// for good, only delayed (Seide et al. 2014; Karimireddy et al. 2019).
//
// - Top-k (Aji & Heafield 2017; Lin et al. 2018, "Deep Gradient Compression"): of all the
//   gradients together (plus the error), the k = ratio * n entries largest in magnitude travel,
//   as (value, index) pairs in one allgather; every rank sums what the others sent into a dense
//   gradient.
// - PowerSGD (Vogels, Karimireddy and Jaggi 2019): each gradient of two or more dimensions,
//   viewed as an n x m matrix M (plus its error), is approximated as P Q^T of rank r by one step of
//   power iteration warm-started from the previous step's Q: P = M Q, allreduce P, orthogonalise
//   it, Q = M^T P, allreduce Q. The allreduces carry (n + m) r numbers instead of n m. Tensors
//   that would not shrink (biases, (n + m) r >= n m) travel uncompressed in the first allreduce.
//   Q starts from the same seeded random matrix on every rank.
//
// Both run on the calling (training) thread at DistributedOptimizer::synchronize(), after
// backward: they need every gradient, and PowerSGD's second allreduce depends on the first.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::torch::detail {

class GradientCompressor {
 public:
  virtual ~GradientCompressor() = default;
  // Replaces every gradient in `grads` (float32; the same shapes, in the same order on every
  // rank and at every call) with the average (or, !average, the sum) over the ranks of their
  // compressed gradients. Collective. Returns the bytes this rank contributed to the
  // collectives (its payload).
  virtual std::size_t reduce(Communicator& comm, const std::vector<::torch::Tensor>& grads, bool average,
                             Timeout timeout) = 0;
};

// ratio in (0, 1]: the share of the entries that travel.
std::unique_ptr<GradientCompressor> makeTopK(double ratio);
// The indices of the k largest entries of `magnitude` (1-D, float32, no NaN; 1 <= k <= n), in no
// order: the same set as magnitude.topk(k), ties apart, but for n >> k about 3x faster (Deep
// Gradient Compression's sampled threshold): the quantile of a fixed sample of the entries
// estimates a threshold just below the k-th largest, the entries at or above it are the
// candidates, and the exact top k is taken among them; a threshold that leaves fewer than k
// candidates falls back to the whole tensor's topk.
::torch::Tensor largestEntries(const ::torch::Tensor& magnitude, std::int64_t k);
// rank >= 1: the rank of the approximation; `shapes`: the gradients' shapes, in reduce()'s order.
// A matrix travels as P and Q where that is fewer numbers ((n + m) r < n m), whole otherwise.
// Throws InvalidArgument when the rank compresses none of them, naming the highest that would.
std::unique_ptr<GradientCompressor> makePowerSgd(int rank,
                                                 const std::vector<std::vector<std::int64_t>>& shapes);

}  // namespace gyre::torch::detail
