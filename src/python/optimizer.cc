// gyre._C.GradientReducer: the C++ DistributedOptimizer's bucketing engine driven from Python.
// gyre.torch.DistributedOptimizer (python/gyre/torch/optimizer.py) wraps the user's Python
// optimizer and calls zero_grad() and synchronize() here; the autograd hooks, the buckets and
// their allreduces are the C++ optimizer's, so no Python runs between backward and the wire.
#include "python/optimizer.h"

#include <string>
#include <utility>
#include <vector>

#include "gyre/torch/distributed_optimizer.h"
#include "python/coordination.h"
#include "python/tensors.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// The optimizer the engine wraps: it owns the parameter groups and steps nothing, since the
// Python optimizer does the update.
class ParameterHolder : public ::torch::optim::Optimizer {
 public:
  explicit ParameterHolder(const std::vector<at::Tensor>& parameters)
      : Optimizer({::torch::optim::OptimizerParamGroup(parameters)},
                  std::make_unique<::torch::optim::SGDOptions>(0.0)) {}
  at::Tensor step(LossClosure /*closure*/) override { return {}; }
};

class GradientReducer {
 public:
  // `index`: the optimizer's place among the DistributedOptimizers made so far (the same on every
  // rank, as their construction is collective), which a joined rank's join() is told when the
  // others reduce (coordination.h).
  GradientReducer(const std::vector<at::Tensor>& parameters, const std::string& compression,
                  int backwardPassesPerStep, ReduceOp op, int processSet, int index) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const std::string arg = "parameter " + std::to_string(i);
      checkedDataType(parameters[i], "DistributedOptimizer", arg.c_str());
      if (!parameters[i].requires_grad())
        throw py::value_error("gyre.DistributedOptimizer: " + arg + " does not require a gradient");
    }
    if (op != ReduceOp::kAverage && op != ReduceOp::kSum)
      throw py::value_error("gyre.DistributedOptimizer: op must be gyre.Average or gyre.Sum");
    if (backwardPassesPerStep < 1)
      throw py::value_error("gyre.DistributedOptimizer: backward_passes_per_step must be at least 1, not " +
                            std::to_string(backwardPassesPerStep));
    auto coordinator = World::coordinator(processSet, "DistributedOptimizer");
    gyre::torch::DistributedOptimizerOptions options;
    gyre::torch::setCompression(options, compression);
    options.backwardPassesPerStep = backwardPassesPerStep;
    options.average = op == ReduceOp::kAverage;
    // Every step's reduction is coordinated with the set's other calls (coordination.h), in order.
    options.beforeReduce = [coordinator, index] {
      CallDescriptor d = describeCall(CallKind::kOptimizer, "DistributedOptimizer.step");
      d.optimizer = index;
      coordinator->runInOrder([&] { coordinate(coordinator->communicator(), d); });
    };
    holder_ = std::make_shared<ParameterHolder>(parameters);
    py::gil_scoped_release release;
    // In the set's order of calls (collective: a communicator of the engine's own, and the ranks
    // check they hold the same parameters). The buckets travel on that communicator, so they never
    // interleave with the set's coordinated calls, whatever thread or order those come in.
    coordinator->runInOrder([&] {
      auto own = coordinator->communicator().split(0, coordinator->communicator().rank());
      engine_ = std::make_unique<gyre::torch::DistributedOptimizer>(std::move(own), holder_, options);
    });
  }

  void zeroGrad() { engine_->zeroGrad(); }
  void synchronize() { engine_->synchronize(); }
  // synchronize(), and the step's timing recorded (last_step()); the Python optimizer steps next.
  void step() { engine_->step(); }
  void joinStep() { engine_->reduceAsJoined(); }
  std::vector<std::size_t> bucketBytes() const { return engine_->bucketBytes(); }

  py::dict lastStep() const {
    const auto& t = engine_->lastStep();
    py::dict d;
    d["step_s"] = t.step;
    d["compute_s"] = t.compute;
    d["communicate_s"] = t.communicate;
    d["wait_s"] = t.wait;
    d["bytes"] = t.bytes;
    d["buckets"] = t.buckets;
    return d;
  }

 private:
  std::shared_ptr<ParameterHolder> holder_;
  std::unique_ptr<gyre::torch::DistributedOptimizer> engine_;
};

}  // namespace

void bindOptimizer(py::module_& m) {
  py::class_<GradientReducer>(
      m, "GradientReducer",
      "Bucketed gradient allreduce overlapped with backward (the C++ DistributedOptimizer).")
      .def(py::init<const std::vector<at::Tensor>&, const std::string&, int, ReduceOp, int, int>(),
           py::arg("parameters"), py::arg("compression") = "none", py::arg("backward_passes_per_step") = 1,
           py::arg("op") = ReduceOp::kAverage, py::arg("process_set") = 0, py::arg("index") = 0)
      .def("zero_grad", &GradientReducer::zeroGrad, py::call_guard<py::gil_scoped_release>(),
           "Sets every gradient to None; backward fills the buckets.")
      .def("synchronize", &GradientReducer::synchronize, py::call_guard<py::gil_scoped_release>(),
           "Waits for the gradients' allreduce; afterwards every .grad holds the average.")
      .def("step", &GradientReducer::step, py::call_guard<py::gil_scoped_release>(),
           "synchronize(), timing the step for last_step().")
      .def("join_step", &GradientReducer::joinStep, py::call_guard<py::gil_scoped_release>(),
           "A joined rank's part in the others' reduction: zero gradients; afterwards .grad holds the result.")
      .def("bucket_bytes", &GradientReducer::bucketBytes)
      .def("last_step", &GradientReducer::lastStep);
}

}  // namespace gyre::python
