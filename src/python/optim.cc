// gyre._C.lars_update / lamb_update: the C++ LARS and LAMB updates (gyre/torch/optimizers.h) of one
// parameter tensor, for gyre.torch.LARS and LAMB (python/gyre/torch/optim.py), which keep their
// state in torch.optim's own dictionaries so that state_dict() and broadcast_optimizer_state work.
#include <torch/extension.h>

#include <optional>

#include "gyre/torch/optimizers.h"
#include "python/optim.h"

namespace py = pybind11;

namespace gyre::python {

void bindOptim(py::module_& m) {
  m.def(
      "lars_update",
      [](const at::Tensor& p, const at::Tensor& grad, const std::optional<at::Tensor>& buffer, double lr,
         double momentum, double weightDecay, double eta, double eps,
         bool adaptVectors) -> std::optional<at::Tensor> {
        gyre::torch::LarsOptions o(lr);
        o.momentum(momentum).weight_decay(weightDecay).eta(eta).eps(eps).adapt_vectors(adaptVectors);
        at::Tensor updated = gyre::torch::larsUpdate(p, grad, buffer.value_or(at::Tensor()), o);
        if (!updated.defined()) return std::nullopt;
        return updated;
      },
      py::call_guard<py::gil_scoped_release>(),
      "One LARS update of p in place; returns the momentum buffer (None without momentum).", py::arg("p"),
      py::arg("grad"), py::arg("momentum_buffer"), py::arg("lr"), py::arg("momentum"), py::arg("weight_decay"),
      py::arg("eta"), py::arg("eps"), py::arg("adapt_vectors"));
  m.def(
      "lamb_update",
      [](const at::Tensor& p, const at::Tensor& grad, const at::Tensor& expAvg, const at::Tensor& expAvgSq,
         std::int64_t step, double lr, double beta1, double beta2, double eps, double weightDecay,
         bool adaptVectors) {
        gyre::torch::LambOptions o(lr);
        o.betas({beta1, beta2}).eps(eps).weight_decay(weightDecay).adapt_vectors(adaptVectors);
        gyre::torch::lambUpdate(p, grad, expAvg, expAvgSq, step, o);
      },
      py::call_guard<py::gil_scoped_release>(),
      "One LAMB update of p in place; exp_avg and exp_avg_sq are updated in place (step counts from 1).",
      py::arg("p"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("step"), py::arg("lr"),
      py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("adapt_vectors"));
}

}  // namespace gyre::python
