// gyre._C.rt: gyre::rt for Python's gyre.rt (rt.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindRt(pybind11::module_& m);

}  // namespace gyre::python
