#include "python/tensors.h"

#include <torch/csrc/utils/tensor_dtypes.h>

#include <string>

#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"

namespace gyre::python {
namespace {

std::string where(const char* call, const char* arg) {
  return std::string("gyre.") + call + ": " + arg;
}

}  // namespace

DataType checkedDataType(const at::Tensor& tensor, const char* call, const char* arg) {
  if (!tensor.defined()) throw pybind11::value_error(where(call, arg) + " is an undefined tensor");
  if (!tensor.device().is_cpu())
    throw pybind11::value_error(where(call, arg) + " lives on " + tensor.device().str() +
                                "; gyre's collectives take CPU tensors");
  if (tensor.layout() != at::kStrided)
    throw pybind11::value_error(where(call, arg) + " is a sparse tensor; gyre's collectives take dense ones");
  try {
    return gyre::torch::toDataType(tensor.scalar_type());
  } catch (const InvalidArgument&) {  // the same rule, as Python's TypeError naming the argument
  }
  throw pybind11::type_error(
      where(call, arg) + " has dtype torch." + ::torch::utils::getDtypeNames(tensor.scalar_type()).first +
      "; gyre takes float16, bfloat16, float32, float64, int8, uint8, int16, int32 and int64");
}

DataType checkedInPlace(const at::Tensor& tensor, const char* call, const char* arg) {
  const DataType dtype = checkedDataType(tensor, call, arg);
  if (!tensor.is_contiguous())
    throw pybind11::value_error(where(call, arg) +
                                " is not contiguous and is written in place; pass tensor.contiguous() or use "
                                "the out-of-place call");
  return dtype;
}

at::Tensor contiguousInput(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : tensor.contiguous();
}

}  // namespace gyre::python
