// gyre._C.tune: the trial API of `gyre tune` (include/gyre/tune.h).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindTune(pybind11::module_& m);

}  // namespace gyre::python
