#include "gyre/torch/broadcast.h"

#include <cstdint>
#include <sstream>
#include <string>

#include "common/check.h"
#include "gyre/errors.h"
#include "torch/optimizer_bytes.h"

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
    default: break;
  }
  throw InvalidArgument(std::string("gyre cannot reduce tensors of type ") + ::c10::toString(type));
}

namespace {

// FNV-1a over a description of the tensors, so ranks can compare structures with two integers.
std::int64_t fingerprint(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return static_cast<std::int64_t>(h >> 1);
}

void checkSameEverywhere(Communicator& comm, const std::string& description, const char* what) {
  const std::int64_t mine = fingerprint(description);
  std::int64_t lowest = mine;
  std::int64_t highest = mine;
  comm.allreduce(&lowest, &lowest, 1, {DataType::kInt64, ReduceOp::kMin});
  comm.allreduce(&highest, &highest, 1, {DataType::kInt64, ReduceOp::kMax});
  GYRE_USAGE_CHECK(lowest == highest, "the ", what, " differ between ranks (rank ", comm.rank(),
                   " has: ", description.substr(0, 400), ")");
}

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
  std::ostringstream description;
  for (const auto& t : tensors) description << t.sizes() << ::c10::toString(t.scalar_type()) << ';';
  checkSameEverywhere(comm, description.str(), "tensors to broadcast");
  for (const auto& t : tensors) broadcastOne(t, comm, root);
}

void broadcastParameters(::torch::nn::Module& module, Communicator& comm, int root) {
  std::ostringstream description;
  std::vector<::torch::Tensor> tensors;
  for (const auto& named : {module.named_parameters(), module.named_buffers()}) {
    for (const auto& item : named) {
      description << item.key() << item.value().sizes() << ::c10::toString(item.value().scalar_type()) << ';';
      tensors.push_back(item.value());
    }
  }
  checkSameEverywhere(comm, description.str(), "models' parameters and buffers");
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
