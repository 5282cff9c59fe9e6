// gyre._C.serve: gyre::serve::Server (include/gyre/serve.h) with a Python callable as each
// replica's forward pass; python/gyre/serve.py is its face.
#pragma once

#include <pybind11/pybind11.h>

namespace gyre::python {

void bindServe(pybind11::module_& m);

}  // namespace gyre::python
