// gyre._C.ps: training through gyre's parameter servers from Python (python/gyre/ps.py): the C++
// PSOptimizer over the Python parameters, its worker from `gyre run --servers S`'s environment.
#include "python/ps.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "gyre/ps.h"
#include "gyre/torch/ps_optimizer.h"
#include "python/tensors.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

class PSTrainer {
 public:
  PSTrainer(const std::vector<at::Tensor>& parameters, double lr, const std::string& mode,
            const std::string& optimizer, double momentum, double weightDecay, double beta1, double beta2,
            double eps, bool pushFromHooks) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const std::string arg = "parameter " + std::to_string(i);
      checkedDataType(parameters[i], "ps.PSOptimizer", arg.c_str());
    }
    ps::OptimizerOptions config;
    if (optimizer == "sgd") {
      config.kind = ps::OptimizerOptions::Kind::kSgd;
    } else if (optimizer == "adam") {
      config.kind = ps::OptimizerOptions::Kind::kAdam;
    } else {
      throw py::value_error("gyre.ps.PSOptimizer: optimizer must be 'sgd' or 'adam', not '" + optimizer +
                            "'");
    }
    config.momentum = static_cast<float>(momentum);
    config.weightDecay = static_cast<float>(weightDecay);
    config.beta1 = static_cast<float>(beta1);
    config.beta2 = static_cast<float>(beta2);
    config.eps = static_cast<float>(eps);
    const ps::TableSpec spec = gyre::torch::PSOptimizer::tableFor(parameters, ps::Mode::parse(mode), config);
    gyre::torch::PSOptimizerOptions options;
    options.pushFromHooks = pushFromHooks;
    py::gil_scoped_release release;  // connecting, and worker 0's parameters reaching everyone
    worker_ = std::shared_ptr<ps::Worker>(ps::Worker::fromEnvironment(spec));
    optimizer_ = std::make_unique<gyre::torch::PSOptimizer>(parameters, worker_, lr, options);
  }

  void zeroGrad() { optimizer_->zeroGrad(); }
  void step() { optimizer_->step(); }
  void setLr(double lr) { optimizer_->setLearningRate(lr); }
  double lr() const { return optimizer_->learningRate(); }

  py::dict stats() const {
    const ps::WorkerStats s = worker_->stats();
    const ps::StalenessSummary staleness = ps::summarizeStaleness(s.staleness);
    py::dict d;
    d["worker"] = worker_->workerId();
    d["workers"] = worker_->numWorkers();
    d["servers"] = worker_->numServers();
    d["steps"] = worker_->steps();
    d["pushes"] = s.pushes;
    d["pulls"] = s.pulls;
    d["bytes_pushed"] = s.bytesPushed;
    d["bytes_pulled"] = s.bytesPulled;
    d["failovers"] = s.failovers;
    d["clock_wait_s"] = s.clockWaitSeconds;
    d["staleness_mean"] = staleness.mean;
    d["staleness_p50"] = staleness.p50;
    d["staleness_p99"] = staleness.p99;
    d["staleness_max"] = staleness.max;
    return d;
  }

 private:
  std::shared_ptr<ps::Worker> worker_;
  std::unique_ptr<gyre::torch::PSOptimizer> optimizer_;
};

}  // namespace

void bindPs(py::module_& m) {
  auto ps = m.def_submodule("ps", "training through gyre's parameter servers");
  py::class_<PSTrainer>(ps, "PSTrainer")
      .def(py::init<const std::vector<at::Tensor>&, double, const std::string&, const std::string&, double,
                    double, double, double, double, bool>(),
           py::arg("parameters"), py::arg("lr"), py::arg("mode"), py::arg("optimizer"), py::arg("momentum"),
           py::arg("weight_decay"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
           py::arg("push_from_hooks"))
      .def("zero_grad", &PSTrainer::zeroGrad, py::call_guard<py::gil_scoped_release>())
      .def("step", &PSTrainer::step, py::call_guard<py::gil_scoped_release>())
      .def("set_lr", &PSTrainer::setLr, py::arg("lr"))
      .def("lr", &PSTrainer::lr)
      .def("stats", &PSTrainer::stats);
}

}  // namespace gyre::python
