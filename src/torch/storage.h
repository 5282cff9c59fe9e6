// A tensor's memory given back and taken again in place: the TensorImpl (and every reference to
// it, autograd's saved tensors included) stays; only its storage's data comes and goes. What
// FullyShardedModel does to a unit's full parameters between uses, and releaseParameters to a
// layer another rank holds.
#pragma once

#include <torch/torch.h>

#include <cstddef>

namespace gyre::torch::detail {

// The storage's memory, freed (its size becomes 0).
void dropStorage(const ::torch::Tensor& tensor);
// `bytes` of memory for the storage, uninitialised, unless it holds that many already.
void provideStorage(const ::torch::Tensor& tensor, std::size_t bytes);
// The bytes the tensor's elements span in its storage, from the storage's start.
std::size_t storageSpan(const ::torch::Tensor& tensor);

}  // namespace gyre::torch::detail
