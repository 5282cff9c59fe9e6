// Checks and conversions between torch tensors handed in from Python and the core's buffers.
#pragma once

#include <torch/extension.h>

#include "gyre/types.h"

namespace gyre::python {

// The gyre dtype of `tensor`, which must be a dense CPU tensor of a type gyre reduces; otherwise
// TypeError (dtype, not a tensor) or ValueError (device, layout) naming `call` and `arg`.
DataType checkedDataType(const at::Tensor& tensor, const char* call, const char* arg);

// As checkedDataType, and the tensor must be contiguous: it is written in place.
DataType checkedInPlace(const at::Tensor& tensor, const char* call, const char* arg);

// `tensor` as a contiguous tensor (itself when it already is, a copy otherwise).
at::Tensor contiguousInput(const at::Tensor& tensor);

}  // namespace gyre::python
