// gyre._C's model parallelism for Python models: the C++ Pipeline (GPipe, 1F1B, interleaved,
// zero-bubble) and FullyShardedModel (ZeRO-3) over a torch.nn.Sequential written in Python. Each
// child of the Sequential becomes a C++ module (PythonLayer) whose forward calls the Python one
// under the GIL and whose parameters and buffers are the Python module's own tensors, so the C++
// code moves, shards and steps the very tensors the Python module computes with. Python's side is
// python/gyre/torch/parallel.py.
#include <torch/extension.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gyre/torch/fully_sharded.h"
#include "gyre/torch/pipeline.h"
#include "python/parallel.h"
#include "python/coordination.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// A Python module as a C++ one: forward under the GIL, its tensors registered as its own.
class PythonLayerImpl : public ::torch::nn::Module {
 public:
  explicit PythonLayerImpl(py::object module) : module_(new py::object(std::move(module))) {
    for (auto item : module_->attr("named_parameters")()) {
      auto pair = item.cast<py::tuple>();
      register_parameter(cName(pair[0].cast<std::string>()), pair[1].cast<at::Tensor>(),
                         pair[1].attr("requires_grad").cast<bool>());
    }
    for (auto item : module_->attr("named_buffers")()) {
      auto pair = item.cast<py::tuple>();
      if (!pair[1].is_none()) register_buffer(cName(pair[0].cast<std::string>()), pair[1].cast<at::Tensor>());
    }
  }
  ~PythonLayerImpl() override {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete module_;
    }  // else the interpreter is gone, and the object with it
  }

  at::Tensor forward(const at::Tensor& x) {
    py::gil_scoped_acquire gil;
    py::object y = (*module_)(x);
    if (!THPVariable_Check(y.ptr()))
      throw py::type_error("gyre.torch: a layer of the Sequential returned " +
                           py::str(py::type::of(y)).cast<std::string>() + ", not one tensor");
    return y.cast<at::Tensor>();
  }

 private:
  // C++ modules take no '.' in a tensor's name.
  static std::string cName(std::string name) {
    for (char& c : name)
      if (c == '.') c = '_';
    return name;
  }
  py::object* module_;  // deleted under the GIL
};
// TORCH_MODULE(PythonLayer), spelt out: the macro names torch::nn unqualified, gyre::torch here.
class PythonLayer : public ::torch::nn::ModuleHolder<PythonLayerImpl> {
 public:
  using ::torch::nn::ModuleHolder<PythonLayerImpl>::ModuleHolder;
};

::torch::nn::Sequential sequentialOf(const py::object& sequential) {
  if (!py::isinstance(sequential, py::module_::import("torch.nn").attr("Sequential")))
    throw py::type_error("gyre.torch: the model must be a torch.nn.Sequential (its children are the layers)");
  ::torch::nn::Sequential layers;
  for (auto child : sequential.attr("children")())
    layers->push_back(PythonLayer(py::reinterpret_borrow<py::object>(child)));
  if (layers->size() == 0) throw py::value_error("gyre.torch: the Sequential has no layers");
  return layers;
}

// A loss function in Python as the pipeline's: called under the GIL.
gyre::torch::Pipeline::Loss lossOf(py::object loss) {
  auto shared = std::shared_ptr<py::object>(new py::object(std::move(loss)), [](py::object* o) {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete o;
    }
  });
  return [shared](const at::Tensor& output, const at::Tensor& target) {
    py::gil_scoped_acquire gil;
    return (*shared)(output, target).cast<at::Tensor>();
  };
}

// A communicator of its own for a model-parallel engine (collective, in the set's order of calls):
// its sends and collectives then never interleave with the set's coordinated calls.
std::shared_ptr<Communicator> ownCommunicator(Coordinator& coordinator) {
  std::shared_ptr<Communicator> own;
  coordinator.runInOrder([&] { own = coordinator.communicator().split(0, coordinator.communicator().rank()); });
  return own;
}

class PythonPipeline {
 public:
  PythonPipeline(const py::object& sequential, std::vector<int> balance, int microBatches,
                 const std::string& schedule, bool recompute, int virtualStages, int processSet)
      : layers_(sequentialOf(sequential)) {
    auto coordinator = World::coordinator(processSet, "Pipeline");
    std::shared_ptr<Communicator> comm;
    {
      py::gil_scoped_release release;
      comm = ownCommunicator(*coordinator);
    }
    const int stages = comm->size() * virtualStages;
    if (balance.empty()) balance = gyre::torch::balanceEvenly(static_cast<int>(layers_->size()), stages);
    balance_ = balance;
    gyre::torch::PipelineOptions options;
    options.microBatches = microBatches;
    options.schedule = gyre::torch::pipelineScheduleFrom(schedule);
    options.recompute = recompute;
    auto mine = gyre::torch::stagesOf(layers_, balance_, comm->rank(), comm->size());
    comm_ = comm.get();
    pipe_ = std::make_unique<gyre::torch::Pipeline>(std::move(mine), std::move(comm), options);
  }

  double step(const at::Tensor& input, const at::Tensor& target, py::object loss) {
    auto fn = lossOf(std::move(loss));
    py::gil_scoped_release release;
    return pipe_->step(input, target, fn);
  }
  std::optional<at::Tensor> forward(const at::Tensor& input) {
    at::Tensor out;
    {
      py::gil_scoped_release release;
      out = pipe_->forward(input);
    }
    if (!out.defined()) return std::nullopt;
    return out;
  }
  void gather() {
    py::gil_scoped_release release;
    gyre::torch::gatherStages(layers_, balance_, *comm_);
  }
  std::vector<at::Tensor> parameters() const { return pipe_->parameters(); }
  py::dict lastStep() const {
    const auto& s = pipe_->lastStep();
    py::dict d;
    d["seconds"] = s.seconds;
    d["busy_seconds"] = s.busySeconds;
    d["bubble"] = s.bubble();
    d["peak_held"] = s.peakHeld;
    d["peak_activation_bytes"] = s.peakActivationBytes;
    return d;
  }
  std::vector<int> balance() const { return balance_; }
  bool holdsLastStage() const { return pipe_->holdsLastStage(); }

 private:
  ::torch::nn::Sequential layers_;
  std::vector<int> balance_;
  Communicator* comm_ = nullptr;  // the pipeline's own, which pipe_ holds
  std::unique_ptr<gyre::torch::Pipeline> pipe_;
};

class PythonFullyShardedModel {
 public:
  PythonFullyShardedModel(const py::object& sequential, bool prefetch, int processSet) {
    auto coordinator = World::coordinator(processSet, "FullyShardedDataParallel");
    gyre::torch::FullyShardedOptions options;
    options.prefetch = prefetch;
    auto layers = sequentialOf(sequential);
    py::gil_scoped_release release;
    // Collective, on a communicator of its own: the ranks check they hold the same parameters.
    model_ = std::make_unique<gyre::torch::FullyShardedModel>(ownCommunicator(*coordinator), std::move(layers),
                                                              options);
  }
  at::Tensor forward(const at::Tensor& input) { return model_->forward(input); }
  void synchronize() { model_->synchronize(); }
  void gatherParameters() { model_->gatherParameters(); }
  void zeroGrad() { model_->zeroGrad(); }
  std::vector<at::Tensor> parameters() const { return model_->parameters(); }
  std::size_t stateBytes() const { return model_->stateBytes(); }
  std::size_t fullParameterBytes() const { return model_->fullParameterBytes(); }

 private:
  std::unique_ptr<gyre::torch::FullyShardedModel> model_;
};

}  // namespace

void bindParallel(py::module_& m) {
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<PythonPipeline>(m, "Pipeline", "The C++ Pipeline over a torch.nn.Sequential written in Python.")
      .def(py::init<const py::object&, std::vector<int>, int, const std::string&, bool, int, int>(),
           py::arg("sequential"), py::arg("balance"), py::arg("micro_batches"), py::arg("schedule"),
           py::arg("recompute"), py::arg("virtual_stages"), py::arg("process_set"))
      .def("step", &PythonPipeline::step, py::arg("input"), py::arg("target"), py::arg("loss"))
      .def("forward", &PythonPipeline::forward, py::arg("input"))
      .def("gather", &PythonPipeline::gather)
      .def("parameters", &PythonPipeline::parameters)
      .def("last_step", &PythonPipeline::lastStep)
      .def("balance", &PythonPipeline::balance)
      .def("holds_last_stage", &PythonPipeline::holdsLastStage);
  py::class_<PythonFullyShardedModel>(m, "FullyShardedModel",
                                      "The C++ FullyShardedModel (ZeRO-3) over a torch.nn.Sequential in Python.")
      .def(py::init<const py::object&, bool, int>(), py::arg("sequential"), py::arg("prefetch"),
           py::arg("process_set"))
      .def("forward", &PythonFullyShardedModel::forward, Release(), py::arg("input"))
      .def("synchronize", &PythonFullyShardedModel::synchronize, Release())
      .def("gather_parameters", &PythonFullyShardedModel::gatherParameters, Release())
      .def("zero_grad", &PythonFullyShardedModel::zeroGrad, Release())
      .def("parameters", &PythonFullyShardedModel::parameters)
      .def("state_bytes", &PythonFullyShardedModel::stateBytes)
      .def("full_parameter_bytes", &PythonFullyShardedModel::fullParameterBytes);
}

}  // namespace gyre::python
