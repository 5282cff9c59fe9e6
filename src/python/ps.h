// gyre._C.ps: the parameter-server trainer for Python (python/gyre/ps.py).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindPs(pybind11::module_& m);

}  // namespace gyre::python
