// gyre._C, the native half of the Python package (python/gyre): the world (elastic memberships
// included), process sets, the collectives on torch tensors, the gradient reducer, and gyre's
// exceptions as Python types.
#include <torch/extension.h>

#include "gyre/errors.h"
#include "gyre/version.h"
#include "python/collectives.h"
#include "python/coordination.h"
#include "python/malloc.h"
#include "python/optim.h"
#include "python/optimizer.h"
#include "python/parallel.h"
#include "python/process_group.h"
#include "python/ps.h"
#include "python/rt.h"
#include "python/serve.h"
#include "python/tune.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

void bindErrors(py::module_& m) {
  // InvalidArgument is a ValueError: the caller passed something wrong. The others are
  // GyreError, a RuntimeError, as Horovod's HorovodInternalError.
  static py::exception<Error> error(m, "GyreError", PyExc_RuntimeError);
  static py::exception<PeerLostError> peerLost(m, "PeerLostError", error.ptr());
  static py::exception<TimeoutError> timeout(m, "TimeoutError", error.ptr());
  static py::exception<InvalidArgument> invalid(m, "InvalidArgumentError", PyExc_ValueError);
  // Ranks that made different calls (coordination.h): Horovod raises a RuntimeError there, and
  // gyre's own callers catch InvalidArgumentError; it is both.
  // Never destroyed: the translator may run until the interpreter's end.
  static PyObject* mismatch = PyErr_NewExceptionWithDoc(
      "gyre._C.CallMismatchError",
      "The ranks made different collective calls, or another rank refused its call; nothing was sent and "
      "the next call can go on.",
      py::make_tuple(invalid, py::handle(PyExc_RuntimeError)).ptr(), nullptr);
  if (mismatch == nullptr) throw py::error_already_set();
  m.attr("CallMismatchError") = py::handle(mismatch);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CallMismatch& e) {
      PyErr_SetString(mismatch, e.what());
    } catch (const PeerLostError& e) {
      peerLost(e.what());
    } catch (const TimeoutError& e) {
      timeout(e.what());
    } catch (const InvalidArgument& e) {
      invalid(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });
}

void bindWorld(py::module_& m) {
  m.def(
      "init", &World::init, py::call_guard<py::gil_scoped_release>(),
      "Joins the job the launcher started (gyre run, mpirun, Slurm, torchrun); a world of one without one.");
  m.def("shutdown", &World::shutdown, py::call_guard<py::gil_scoped_release>());
  m.def("is_initialized", &World::initialized);
  m.def("rank", [] { return World::world("rank")->rank(); });
  m.def("size", [] { return World::world("size")->size(); });
  m.def("local_rank", [] { return World::launch("local_rank").localRank; });
  m.def("local_size", [] { return World::launch("local_size").localSize; });
  m.def("host_indices", [] { return World::world("cross_rank")->hostIndices(); },
        "Each rank's host as an index (the world communicator's), in rank order.");
  m.def("add_process_set", &World::addProcessSet, py::call_guard<py::gil_scoped_release>(), py::arg("ranks"));
  m.def("remove_process_set", &World::removeProcessSet, py::arg("process_set_id"));
  m.def("process_set_ranks", &World::processSetRanks, py::arg("process_set_id"));
  m.def(
      "process_set_rank", [](int id) { return World::communicator(id, "ProcessSet.rank")->rank(); },
      py::arg("process_set_id"));
  // gyre.torch.elastic's native half: the membership protocol of `gyre run --elastic`.
  auto elastic = m.def_submodule("elastic", "the membership of an elastic job");
  elastic.def("enabled", &World::elastic, "Whether gyre.init() joined an elastic job's membership.");
  elastic.def("membership_changed", &World::membershipChanged, py::call_guard<py::gil_scoped_release>(),
              "Collective: whether the launcher published a newer membership.");
  elastic.def("reset", &World::elasticReset, py::call_guard<py::gil_scoped_release>(), py::arg("why") = "",
              "Leaves the membership (telling the launcher why) and joins the next, the new world.");
  elastic.def("membership", &World::membership, "The membership trained in (1, 2, ...); 0 outside.");
}

}  // namespace
}  // namespace gyre::python

PYBIND11_MODULE(_C, m) {
  using gyre::ReduceOp;
  m.doc() = "gyre's native core: communicators and collectives on torch tensors";
  m.attr("__version__") = gyre::kVersion;
  m.attr("torch_version") = TORCH_VERSION;  // the libtorch this module was built against
#ifdef GYRE_WITH_MPI
  m.attr("mpi_built") = true;
#else
  m.attr("mpi_built") = false;
#endif
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("Sum", ReduceOp::kSum)
      .value("Average", ReduceOp::kAverage)
      .value("Product", ReduceOp::kProduct)
      .value("Min", ReduceOp::kMin)
      .value("Max", ReduceOp::kMax);
  gyre::python::bindErrors(m);
  gyre::python::bindWorld(m);
  gyre::python::bindCollectives(m);
  gyre::python::bindJoin(m);
  gyre::python::bindOptimizer(m);
  gyre::python::bindOptim(m);
  gyre::python::bindParallel(m);
  gyre::python::bindMalloc(m);
  gyre::python::bindTune(m);
#ifdef GYRE_PYTHON_SERVE
  gyre::python::bindServe(m);
#endif
  gyre::python::bindPs(m);
  gyre::python::bindRt(m);
  gyre::python::bindProcessGroup(m);
}
