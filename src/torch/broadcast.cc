#include "gyre/torch/broadcast.h"

#include <cstdint>
#include <string>

#include "common/check.h"
#include "gyre/errors.h"
#include "torch/optimizer_bytes.h"
#include "torch/parameter_check.h"

namespace gyre::torch {

DataType toDataType(::torch::ScalarType type) {
  switch (type) {
    case ::torch::kFloat32: return DataType::kFloat32;
    case ::torch::kFloat64: return DataType::kFloat64;
    case ::torch::kFloat16: return DataType::kFloat16;
    case ::torch::kBFloat16: return DataType::kBFloat16;
    case ::torch::kInt8: return DataType::kInt8;
    case ::torch::kUInt8: return DataType::kUInt8;
    case ::torch::kInt32: return DataType::kInt32;
    case ::torch::kInt64: return DataType::kInt64;
    case ::torch::kInt16: return DataType::kInt16;
    default: break;
  }
  throw InvalidArgument(std::string("gyre cannot reduce tensors of type ") + ::c10::toString(type));
}

namespace {

void broadcastOne(const ::torch::Tensor& tensor, Communicator& comm, int root) {
  ::torch::NoGradGuard noGrad;
  BroadcastOptions o;
  o.dtype = toDataType(tensor.scalar_type());
  o.root = root;
  GYRE_USAGE_CHECK(tensor.device().is_cpu(), "broadcast: tensors must live on the CPU");
  if (tensor.is_contiguous()) {
    comm.broadcast(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), o);
    return;
  }
  ::torch::Tensor copy = tensor.contiguous();
  comm.broadcast(copy.data_ptr(), static_cast<std::size_t>(copy.numel()), o);
  tensor.copy_(copy);
}

}  // namespace

void broadcastTensors(const std::vector<::torch::Tensor>& tensors, Communicator& comm, int root) {
  checkSameParameters(comm, tensors, {}, "broadcastTensors");
  for (const auto& t : tensors) broadcastOne(t, comm, root);
}

void broadcastParameters(::torch::nn::Module& module, Communicator& comm, int root) {
  std::vector<std::string> names;
  std::vector<::torch::Tensor> tensors;
  for (const auto& named : {module.named_parameters(), module.named_buffers()}) {
    for (const auto& item : named) {
      names.push_back(item.key());
      tensors.push_back(item.value());
    }
  }
  checkSameParameters(comm, tensors, names, "broadcastParameters (parameters, then buffers)");
  for (const auto& t : tensors) broadcastOne(t, comm, root);
}

void broadcastOptimizerState(::torch::optim::Optimizer& optimizer, Communicator& comm, int root) {
  std::string bytes;
  if (comm.rank() == root) bytes = optimizerStateBytes(optimizer);
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  comm.broadcast(&size, 1, {DataType::kInt64, root});
  bytes.resize(static_cast<std::size_t>(size));
  comm.broadcast(bytes.data(), bytes.size(), {DataType::kUInt8, root});
  if (comm.rank() == root) return;
  loadOptimizerStateBytes(optimizer, bytes,
                          "broadcastOptimizerState: the root's optimizer (rank " + std::to_string(root) + ")");
}

}  // namespace gyre::torch
