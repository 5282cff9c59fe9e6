// Parameters without memory: the layers of a model that another rank trains (a pipeline's other
// stages, the rest of a ZeRO-3 unit), kept as tensors of their shapes so that the model's
// structure, names and layer counts stay whole, while only this rank's part holds memory.
//
//   nn::Sequential model = ...;                      // built child by child, in the same order everywhere
//   if (!mine(child)) gyre::torch::releaseParameters(*child);   // right after it is made
//   ...
//   gyre::torch::materialiseParameters(*model);      // memory again (uninitialised), to receive values
//
// A released tensor keeps its shape, dtype and every reference to it (modules, optimizers); its
// data pointer is null and reading it is an error. Thread-safety: none (call it where the model
// is not used).
#pragma once

#include <torch/torch.h>

namespace gyre::torch {

// Gives back the memory of every parameter and buffer of `module` (and of its children).
void releaseParameters(::torch::nn::Module& module);
// Memory again for every parameter and buffer of `module` that has none, uninitialised; those
// that hold memory are left as they are.
void materialiseParameters(::torch::nn::Module& module);
// Whether the tensor holds memory for its elements (a tensor of no elements always does).
bool isMaterialised(const ::torch::Tensor& tensor);
// The same for one tensor: its memory given back, or memory again (uninitialised) when it has none.
// Releasing takes the memory from every tensor on the same storage (a bucket's parameters laid out
// in one flat tensor, views): ask holdsStorageAlone first where that may be.
void releaseTensor(const ::torch::Tensor& tensor);
void materialiseTensor(const ::torch::Tensor& tensor);
// Whether no other tensor shares the tensor's storage and it spans all of it.
bool holdsStorageAlone(const ::torch::Tensor& tensor);

}  // namespace gyre::torch
