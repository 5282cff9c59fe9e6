// gyre._C's LARS and LAMB updates on one tensor (optim.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindOptim(pybind11::module_& m);

}  // namespace gyre::python
