// gyre._C.keep_freed_memory(): glibc malloc settings for a training process (malloc.cc says why).
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

bool keepFreedMemory();
void bindMalloc(pybind11::module_& m);

}  // namespace gyre::python
