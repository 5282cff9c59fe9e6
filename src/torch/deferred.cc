#include "gyre/torch/deferred.h"

#include <c10/core/StorageImpl.h>

#include "torch/storage.h"

namespace gyre::torch {
namespace detail {

void dropStorage(const ::torch::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

void provideStorage(const ::torch::Tensor& tensor, std::size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == bytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

std::size_t storageSpan(const ::torch::Tensor& tensor) {
  if (tensor.numel() == 0) return 0;
  std::int64_t last = tensor.storage_offset();
  for (std::int64_t d = 0; d < tensor.dim(); ++d) last += (tensor.size(d) - 1) * tensor.stride(d);
  return static_cast<std::size_t>(last + 1) * tensor.element_size();
}

}  // namespace detail

namespace {

template <typename F>
void forEachTensor(::torch::nn::Module& module, F&& f) {
  for (const ::torch::Tensor& p : module.parameters()) f(p);
  for (const ::torch::Tensor& b : module.buffers()) f(b);
}

}  // namespace

void releaseTensor(const ::torch::Tensor& tensor) { detail::dropStorage(tensor); }

void materialiseTensor(const ::torch::Tensor& tensor) {
  if (!isMaterialised(tensor)) detail::provideStorage(tensor, detail::storageSpan(tensor));
}

void releaseParameters(::torch::nn::Module& module) { forEachTensor(module, releaseTensor); }

void materialiseParameters(::torch::nn::Module& module) { forEachTensor(module, materialiseTensor); }

bool holdsStorageAlone(const ::torch::Tensor& tensor) {
  return tensor.storage().use_count() == 1 && tensor.storage_offset() == 0 &&
         tensor.storage().nbytes() == detail::storageSpan(tensor);
}

bool isMaterialised(const ::torch::Tensor& tensor) {
  return tensor.numel() == 0 || tensor.storage().nbytes() >= detail::storageSpan(tensor);
}

}  // namespace gyre::torch
