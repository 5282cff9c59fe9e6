#include "gyre/serve.h"

#include <torch/extension.h>

#include <memory>
#include <string>
#include <vector>

#include "python/serve.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// A Python callable held from C++ threads: its references change only under the GIL.
class PyForward {
 public:
  explicit PyForward(py::object fn) : fn_(std::move(fn)) {}
  PyForward(const PyForward&) = delete;
  PyForward& operator=(const PyForward&) = delete;
  ~PyForward() {
    if (!Py_IsInitialized()) {  // the interpreter is gone: nothing to give back
      fn_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    fn_ = py::object();
  }

  // On a replica's thread: the callable on one batch, under the GIL (torch's operations release
  // it while they compute, so replicas overlap there). What it raises fails the batch, with the
  // Python error's type and message.
  ::torch::Tensor operator()(const ::torch::Tensor& rows) const {
    py::gil_scoped_acquire gil;
    py::object out = fn_(rows);
    if (!THPVariable_Check(out.ptr()))
      throw Error("the served callable returned a " + std::string(py::str(py::type::of(out).attr("__name__"))) +
                  ", not a torch.Tensor");
    return THPVariable_Unpack(out.ptr());
  }

 private:
  py::object fn_;
};

serve::ServedModel pythonModel(py::object fn, const std::string& name, std::vector<std::int64_t> rowShape) {
  serve::ServedModel m;
  m.name = name;
  m.kind = "python";
  m.rowShape = std::move(rowShape);
  // Every replica calls the same callable; the holder is shared, so it goes with the last one.
  auto held = std::make_shared<PyForward>(std::move(fn));
  m.makeReplica = [held]() -> serve::Forward {
    return [held](const ::torch::Tensor& rows) { return (*held)(rows); };
  };
  return m;
}

}  // namespace

void bindServe(py::module_& m) {
  auto serve = m.def_submodule("serve", "gyre serve's server for a Python callable");
  py::class_<serve::ServeOptions>(serve, "ServeOptions")
      .def(py::init<>())
      .def_readwrite("host", &serve::ServeOptions::host)
      .def_readwrite("port", &serve::ServeOptions::port)
      .def_readwrite("replicas", &serve::ServeOptions::replicas)
      .def_readwrite("min_replicas", &serve::ServeOptions::minReplicas)
      .def_readwrite("max_replicas", &serve::ServeOptions::maxReplicas)
      .def_readwrite("target_ongoing_requests", &serve::ServeOptions::targetOngoing)
      .def_readwrite("upscale_delay", &serve::ServeOptions::upscaleDelayS)
      .def_readwrite("downscale_delay", &serve::ServeOptions::downscaleDelayS)
      .def_readwrite("max_batch_size", &serve::ServeOptions::maxBatchSize)
      .def_readwrite("batch_wait_ms", &serve::ServeOptions::batchWaitMs)
      .def_readwrite("max_connections", &serve::ServeOptions::maxConnections)
      .def_readwrite("max_queue", &serve::ServeOptions::maxQueue)
      .def_readwrite("max_body_bytes", &serve::ServeOptions::maxBodyBytes)
      .def_readwrite("read_timeout", &serve::ServeOptions::readTimeoutS);
  // The GIL is let go wherever the server may wait for a replica, which takes it to compute.
  py::class_<serve::Server>(serve, "Server")
      .def(py::init([](py::object fn, const std::string& name, std::vector<std::int64_t> rowShape,
                       const serve::ServeOptions& options) {
             serve::ServedModel model = pythonModel(std::move(fn), name, std::move(rowShape));
             py::gil_scoped_release release;
             return std::make_unique<serve::Server>(std::move(model), options);
           }),
           py::arg("fn"), py::arg("name"), py::arg("row_shape"), py::arg("options"))
      .def_property_readonly("port", &serve::Server::port)
      .def("start", &serve::Server::start, py::call_guard<py::gil_scoped_release>())
      .def("stop", &serve::Server::stop, py::call_guard<py::gil_scoped_release>());
}

}  // namespace gyre::python
