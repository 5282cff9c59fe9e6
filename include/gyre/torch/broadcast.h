// Start every rank from the same model and optimizer state.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "gyre/communicator.h"

namespace gyre::torch {

// Copies the root's parameters and buffers (batch-norm statistics, ...) into every rank's
// module, in module->named_parameters() / named_buffers() order. Collective; the modules must
// have the same structure (checked: a mismatch throws InvalidArgument on every rank).
void broadcastParameters(::torch::nn::Module& module, Communicator& comm, int root = 0);
// The same for a list of tensors (contiguous CPU tensors, same shapes and dtypes on every rank).
void broadcastTensors(const std::vector<::torch::Tensor>& tensors, Communicator& comm, int root = 0);

// Copies the root's optimizer state (each parameter group's options, such as the learning rate,
// and per-parameter state, such as momentum buffers) to every rank, through libtorch's own
// serialisation, so any torch::optim optimizer works. Collective.
void broadcastOptimizerState(::torch::optim::Optimizer& optimizer, Communicator& comm, int root = 0);

// The gyre dtype of a torch dtype; throws InvalidArgument for types gyre does not reduce.
DataType toDataType(::torch::ScalarType type);

}  // namespace gyre::torch
