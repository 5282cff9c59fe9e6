// gyre::data's batch transforms: random flips and crops drawn from each batch's own generator.
#include <ATen/CPUGeneratorImpl.h>

#include "common/check.h"
#include "gyre/torch/data.h"

namespace gyre::data {

Transform randomHorizontalFlip(double p) {
  GYRE_USAGE_CHECK(p >= 0 && p <= 1, "randomHorizontalFlip: p must be in [0, 1], not ", p);
  return [p](Batch& batch, at::Generator& random) {
    const std::int64_t n = batch.images.size(0);
    const ::torch::Tensor flip = ::torch::rand({n}, random).lt(p);
    const ::torch::Tensor which = flip.nonzero().flatten();
    if (which.numel() == 0) return;
    batch.images = batch.images.clone();
    batch.images.index_copy_(0, which, batch.images.index_select(0, which).flip({-1}));
  };
}

Transform randomCrop(std::int64_t padding, double fill) {
  GYRE_USAGE_CHECK(padding >= 0, "randomCrop: the padding must not be negative, not ", padding);
  return [padding, fill](Batch& batch, at::Generator& random) {
    if (padding == 0) return;
    const std::int64_t n = batch.images.size(0), h = batch.images.size(-2), w = batch.images.size(-1);
    const ::torch::Tensor padded = ::torch::constant_pad_nd(batch.images, {padding, padding, padding, padding}, fill);
    const ::torch::Tensor at = ::torch::randint(0, 2 * padding + 1, {n, 2}, random);
    const auto* place = at.data_ptr<std::int64_t>();
    ::torch::Tensor out = ::torch::empty_like(batch.images);
    for (std::int64_t k = 0; k < n; ++k)
      out[k].copy_(padded[k].narrow(-2, place[2 * k], h).narrow(-1, place[2 * k + 1], w));
    batch.images = out;
  };
}

void applyTransforms(Batch& batch, const std::vector<Transform>& transforms, std::uint64_t seed) {
  if (transforms.empty()) return;
  // One generator per (seed, batch): splitmix64 of both, so neighbouring batches draw apart.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(batch.index) + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  at::Generator random = at::make_generator<at::CPUGeneratorImpl>(z ^ (z >> 31));
  for (const Transform& t : transforms) t(batch, random);
}

}  // namespace gyre::data
