// gyre._C.tune: gyre::tune's trial API (include/gyre/tune.h) for Python programs that `gyre tune`
// runs as trials; python/gyre/tune.py is its face.
#include "gyre/tune.h"

#include <pybind11/stl.h>

#include "python/tune.h"

namespace py = pybind11;

namespace gyre::python {

void bindTune(py::module_& m) {
  auto tune = m.def_submodule("tune", "gyre tune's trial API");
  tune.def("in_trial", &gyre::tune::inTrial);
  tune.def(
      "report",
      [](const std::map<std::string, double>& metrics, int iteration) {
        return iteration > 0 ? gyre::tune::report(metrics, iteration) : gyre::tune::report(metrics);
      },
      py::arg("metrics"), py::arg("iteration") = 0, py::call_guard<py::gil_scoped_release>());
  tune.def("start_iteration", &gyre::tune::startIteration);
  tune.def("stop_at", &gyre::tune::stopAt);
  tune.def("checkpoint_dir", &gyre::tune::checkpointDir);
  tune.def("trial_dir", &gyre::tune::trialDir);
  tune.def("trial_id", &gyre::tune::trialId);
}

}  // namespace gyre::python
