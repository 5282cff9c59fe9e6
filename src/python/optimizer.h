// gyre._C.GradientReducer: the engine behind gyre.torch.DistributedOptimizer.
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindOptimizer(pybind11::module_& m);

}  // namespace gyre::python
