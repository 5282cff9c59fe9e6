// gyre._C.Pipeline and gyre._C.FullyShardedModel: the C++ model parallelism over Python models
// (parallel.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindParallel(pybind11::module_& m);

}  // namespace gyre::python
