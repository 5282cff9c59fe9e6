// gyre._C's collectives on torch tensors: each call checks its tensors, coordinates with the
// other ranks (coordination.h), prepares its output (prepared.h) and runs the core's collective,
// blocking (the GIL released) or asynchronously (a Handle).
#include "python/collectives.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gyre/torch/broadcast.h"
#include "python/coordination.h"
#include "python/prepared.h"
#include "python/tensors.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// A call of the API, checked: its process set's coordinator, its descriptor, and what runs in its
// turn, given every rank's descriptor, to give its output.
using Run = std::function<at::Tensor(Communicator&, const std::vector<CallDescriptor>&)>;
struct Call {
  std::shared_ptr<Coordinator> coordinator;
  CallDescriptor mine;
  Run run;
};

// Runs `check` (the caller's own arguments, then its call's descriptor) on the caller's thread. A
// check that fails is told to the other ranks in this rank's order of calls, so that they raise
// too instead of waiting, and raised here.
template <class Check>
CallDescriptor checked(Coordinator& coordinator, const char* call, Check check) {
  try {
    return check();
  } catch (const std::exception& e) {
    const std::string error = e.what();  // while the GIL is held: a Python error's text may need it
    try {
      py::gil_scoped_release release;
      coordinator.runInOrder([&] { refuse(coordinator.communicator(), call, error); });
    } catch (const std::exception&) {  // a lost peer: this rank's own error is the one to raise
    }
    throw;
  }
}

// The call, coordinated with the other ranks (coordination.h), then run.
at::Tensor runCall(Communicator& comm, const CallDescriptor& mine, const Run& run) {
  return run(comm, coordinate(comm, mine));
}

at::Tensor runNow(const Call& c) {
  py::gil_scoped_release release;
  at::Tensor out;
  c.coordinator->runInOrder([&] { out = runCall(c.coordinator->communicator(), c.mine, c.run); });
  return out;
}

std::shared_ptr<Handle> runQueued(Call c) {
  auto output = std::make_shared<at::Tensor>();
  Coordinator* coordinator = c.coordinator.get();  // it runs its queue before it goes
  auto task = coordinator->submit([coordinator, mine = c.mine, run = std::move(c.run), output] {
    *output = runCall(coordinator->communicator(), mine, run);
  });
  return std::make_shared<Handle>(std::move(task), std::move(output));
}

// Binds NAME (blocking) and NAME_async (a Handle) to one checked call.
template <class... Args, class Prepare, class... Extra>
void bindPair(py::module_& m, const char* name, const char* asyncName, Prepare prepare, const char* doc,
              Extra... extra) {
  m.def(
      name, [prepare, name](Args... args) { return runNow(prepare(name, args...)); }, doc, extra...);
  m.def(
      asyncName, [prepare, asyncName](Args... args) { return runQueued(prepare(asyncName, args...)); }, doc,
      extra...);
}

}  // namespace

Handle::~Handle() {
  // Without the GIL: the coordinator's thread may need it to release the tensors its call held.
  std::optional<py::gil_scoped_release> release;
  if (PyGILState_Check()) release.emplace();
  try {
    task_->wait();
  } catch (...) {  // nobody asked for the result
  }
}

at::Tensor Handle::wait() {
  task_->wait();  // rethrows the call's failure
  return *output_;
}

void bindCollectives(py::module_& m) {
  py::class_<Handle, std::shared_ptr<Handle>>(
      m, "Handle", "An asynchronous collective in flight; wait() returns its output.")
      .def("wait", &Handle::wait, py::call_guard<py::gil_scoped_release>(),
           "Blocks until the collective finishes and returns its output; raises its failure.")
      .def("poll", &Handle::poll, "True once the collective has finished (never blocks).");

  auto allreduce = [](bool inPlace) {
    return [inPlace](const char* call, const at::Tensor& tensor, ReduceOp op, double prescale, double postscale,
                     int processSet, const std::string& name) {
      Call c{World::coordinator(processSet, call), {}, {}};
      c.mine = checked(*c.coordinator, call, [&] {
        inPlace ? checkedInPlace(tensor, call, "tensor") : checkedDataType(tensor, call, "tensor");
        CallDescriptor d = describeCall(CallKind::kAllreduce, call, tensor, name.c_str());
        d.op = static_cast<std::uint8_t>(op);
        d.prescale = prescale;
        d.postscale = postscale;
        return d;
      });
      c.run = [=](Communicator& comm, const std::vector<CallDescriptor>&) {
        return runNow(comm, prepareAllreduce(tensor, op, prescale, postscale, inPlace));
      };
      return c;
    };
  };
  for (const bool inPlace : {false, true}) {
    bindPair<const at::Tensor&, ReduceOp, double, double, int, const std::string&>(
        m, inPlace ? "allreduce_" : "allreduce", inPlace ? "allreduce_async_" : "allreduce_async",
        allreduce(inPlace),
        inPlace ? "Reduces `tensor` over the ranks in place (op: Average by default)."
                : "Reduces `tensor` over the ranks into a new tensor (op: Average by default).",
        py::arg("tensor"), py::arg("op") = ReduceOp::kAverage, py::arg("prescale_factor") = 1.0,
        py::arg("postscale_factor") = 1.0, py::arg("process_set") = 0, py::arg("name") = "");
  }

  auto broadcast = [](bool inPlace) {
    return [inPlace](const char* call, const at::Tensor& tensor, int root, int processSet, const std::string& name) {
      Call c{World::coordinator(processSet, call), {}, {}};
      c.mine = checked(*c.coordinator, call, [&] {
        inPlace ? checkedInPlace(tensor, call, "tensor") : checkedDataType(tensor, call, "tensor");
        checkRoot(root, c.coordinator->communicator(), call);
        CallDescriptor d = describeCall(CallKind::kBroadcast, call, tensor, name.c_str());
        d.root = root;
        return d;
      });
      c.run = [=](Communicator& comm, const std::vector<CallDescriptor>&) {
        return runNow(comm, prepareBroadcast(tensor, root, inPlace));
      };
      return c;
    };
  };
  bindPair<const at::Tensor&, int, int, const std::string&>(
      m, "broadcast", "broadcast_async", broadcast(false), "A copy of root_rank's `tensor` on every rank.",
      py::arg("tensor"), py::arg("root_rank"), py::arg("process_set") = 0, py::arg("name") = "");
  bindPair<const at::Tensor&, int, int, const std::string&>(
      m, "broadcast_", "broadcast_async_", broadcast(true), "Overwrites `tensor` with root_rank's, in place.",
      py::arg("tensor"), py::arg("root_rank"), py::arg("process_set") = 0, py::arg("name") = "");

  bindPair<const at::Tensor&, int, const std::string&>(
      m, "allgather", "allgather_async",
      [](const char* call, const at::Tensor& tensor, int processSet, const std::string& name) {
        Call c{World::coordinator(processSet, call), {}, {}};
        c.mine = checked(*c.coordinator, call, [&] {
          checkedDataType(tensor, call, "tensor");
          return describeCall(CallKind::kAllgather, call, tensor, name.c_str());
        });
        c.run = [tensor, rowElements = c.mine.rowElements](Communicator& comm,
                                                           const std::vector<CallDescriptor>& all) {
          std::vector<std::int64_t> rows;  // the shapes every rank announced
          for (const CallDescriptor& d : all) rows.push_back(d.kind == CallKind::kJoin ? 0 : d.shape[0]);
          return runNow(comm, prepareAllgather(tensor, rows, rowElements));
        };
        return c;
      },
      "Every rank's `tensor` concatenated along the first dimension, in rank order (first dimensions may "
      "differ).",
      py::arg("tensor"), py::arg("process_set") = 0, py::arg("name") = "");

  bindPair<const at::Tensor&, ReduceOp, int, const std::string&>(
      m, "reduce_scatter", "reduce_scatter_async",
      [](const char* call, const at::Tensor& tensor, ReduceOp op, int processSet, const std::string& name) {
        Call c{World::coordinator(processSet, call), {}, {}};
        c.mine = checked(*c.coordinator, call, [&] {
          checkedDataType(tensor, call, "tensor");
          checkHasRows(tensor, call);
          CallDescriptor d = describeCall(CallKind::kReduceScatter, call, tensor, name.c_str());
          d.op = static_cast<std::uint8_t>(op);
          return d;
        });
        c.run = [=](Communicator& comm, const std::vector<CallDescriptor>&) {
          return runNow(comm, prepareReduceScatter(tensor, op, comm));
        };
        return c;
      },
      "Reduces `tensor` over the ranks and gives rank r its share of the rows (op: Average by default).",
      py::arg("tensor"), py::arg("op") = ReduceOp::kAverage, py::arg("process_set") = 0, py::arg("name") = "");

  // alltoall: the rows received from each rank fill `received` when the call runs.
  auto alltoall = [](const char* call, const at::Tensor& tensor, std::vector<std::int64_t> splits, int processSet,
                     const std::string& name) {
    Call c{World::coordinator(processSet, call), {}, {}};
    c.mine = checked(*c.coordinator, call, [&] {
      checkedDataType(tensor, call, "tensor");
      splits = checkedSplits(tensor, std::move(splits), c.coordinator->communicator().size(), call);
      return describeCall(CallKind::kAlltoall, call, tensor, name.c_str());
    });
    at::Tensor received = at::zeros({static_cast<std::int64_t>(splits.size())}, at::kLong);
    c.run = [tensor, splits, received, call](Communicator& comm, const std::vector<CallDescriptor>&) {
      auto [p, rows] = prepareAlltoall(tensor, splits, comm, call);
      received.copy_(rows);
      return runNow(comm, std::move(p));
    };
    return std::make_pair(std::move(c), received);
  };
  m.def(
      "alltoall",
      [alltoall](const at::Tensor& tensor, std::vector<std::int64_t> splits, int processSet, const std::string& name) {
        auto [c, received] = alltoall("alltoall", tensor, std::move(splits), processSet, name);
        return std::make_pair(runNow(c), received);
      },
      "Sends splits[r] rows of `tensor` to rank r; returns what arrived and the rows from each rank.",
      py::arg("tensor"), py::arg("splits") = std::vector<std::int64_t>{}, py::arg("process_set") = 0,
      py::arg("name") = "");
  m.def(
      "alltoall_async",
      [alltoall](const at::Tensor& tensor, std::vector<std::int64_t> splits, int processSet, const std::string& name) {
        auto [c, received] = alltoall("alltoall_async", tensor, std::move(splits), processSet, name);
        return std::make_pair(runQueued(std::move(c)), received);
      },
      "alltoall, queued; the rows from each rank are filled in once it has run.", py::arg("tensor"),
      py::arg("splits") = std::vector<std::int64_t>{}, py::arg("process_set") = 0, py::arg("name") = "");

  m.def(
      "barrier",
      [](int processSet) {
        Call c{World::coordinator(processSet, "barrier"), describeCall(CallKind::kBarrier, "barrier"), {}};
        c.run = [](Communicator& comm, const std::vector<CallDescriptor>&) {
          comm.barrier();
          return at::Tensor();
        };
        runNow(c);
      },
      "Returns once every rank of the process set has called it.", py::arg("process_set") = 0);

  m.def(
      "broadcast_tensors",
      [](const std::vector<at::Tensor>& tensors, int root, int processSet) {
        Call c{World::coordinator(processSet, "broadcast_parameters"), {}, {}};
        c.mine = checked(*c.coordinator, "broadcast_parameters", [&] {
          checkRoot(root, c.coordinator->communicator(), "broadcast_parameters");
          CallDescriptor d = describeCall(CallKind::kBroadcastTensors, "broadcast_parameters");
          d.root = root;
          d.numel = static_cast<std::int64_t>(tensors.size());
          return d;
        });
        c.run = [&](Communicator& comm, const std::vector<CallDescriptor>&) {
          gyre::torch::broadcastTensors(tensors, comm, root);
          return at::Tensor();
        };
        runNow(c);
      },
      "Overwrites each tensor with root's, in place (contiguous CPU tensors).", py::arg("tensors"),
      py::arg("root_rank"), py::arg("process_set") = 0);

  m.def(
      "refuse",
      [](int processSet, const std::string& call, const std::string& error) {
        auto coordinator = World::coordinator(processSet, call.c_str());
        py::gil_scoped_release release;
        coordinator->runInOrder([&] { refuse(coordinator->communicator(), call.c_str(), error); });
      },
      "Tells the other ranks that this rank's call was refused by its own checks (they raise too).",
      py::arg("process_set"), py::arg("call"), py::arg("error"));
}

}  // namespace gyre::python
