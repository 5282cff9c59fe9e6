// An optimizer's state as bytes and back, with what libtorch leaves out: libtorch's load() keeps
// the loading optimizer's group options (learning rate, momentum, ...), so each parameter
// group's options travel beside the state. Used by broadcastOptimizerState and checkpoints.
#pragma once

#include <torch/torch.h>

#include <string>

namespace gyre::torch {

// libtorch's archive of `archive` as bytes.
std::string archiveBytes(::torch::serialize::OutputArchive& archive);

std::string optimizerStateBytes(const ::torch::optim::Optimizer& optimizer);

// The bytes of the tensors in the optimizer's per-parameter state (momentum, Adam's moments, ...),
// counted where they lie, without serialising them: libtorch's SGD, Adam, AdamW, Adagrad and
// RMSprop and gyre's Lars and Lamb. For any other state the size of optimizerStateBytes().
std::size_t optimizerStateTensorBytes(const ::torch::optim::Optimizer& optimizer);

// Loads bytes from optimizerStateBytes into `optimizer`, options included. Throws
// InvalidArgument "<source> has fewer parameter groups than this one" when they do not fit.
void loadOptimizerStateBytes(::torch::optim::Optimizer& optimizer, const std::string& bytes,
                             const std::string& source);

}  // namespace gyre::torch
