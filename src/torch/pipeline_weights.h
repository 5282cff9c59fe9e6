// Zero-bubble's W, op by op: the weight gradients of one layer's backward, put off until the
// schedule has time for them.
//
// A layer such as a transformer block is many ops. Its input gradient (zero-bubble's I) runs
// through every op on the path from the layer's output to its input; each op on that path that
// also feeds a parameter (a matrix product, a layer norm, an addition of a bias) is a "frontier"
// op. Backing the whole layer up again from its output for the weights would redo the I pass's
// work through every op. Instead, a hook on each frontier op keeps the gradient the I pass hands
// it; W cuts the frontier ops' edges towards the input (the I pass is done with them) and runs
// them once more, all in one pass of libtorch's engine, from those gradients: the engine then
// computes only their parameter outputs, and the weight gradients cost what they cost in a whole
// backward. A parameter fed through several ops gets the sum, as in a whole backward.
//
// A layer whose input needs no gradient (the first stage's first layer) has no I pass: its W is
// the whole backward to its parameters.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace gyre::torch::pipeline {

class DeferredWeights {
 public:
  // Before the layer's input-gradient pass (which must keep the graph: retain_graph): `output`
  // and its gradient `grad` (undefined for a scalar loss), the layer's `params` that require a
  // gradient, and its `input`, a leaf (undefined, or not requiring a gradient: there is no input
  // pass, and W is the whole backward to the parameters).
  DeferredWeights(::torch::Tensor output, ::torch::Tensor grad, std::vector<::torch::Tensor> params,
                  const ::torch::Tensor& input);
  ~DeferredWeights();
  DeferredWeights(DeferredWeights&&) noexcept;
  DeferredWeights& operator=(DeferredWeights&&) noexcept;

  // After the input passes: accumulates the parameters' gradients of every layer in `layers`, in
  // one pass of the engine for the frontier ops of all of them. Once.
  static void run(std::vector<DeferredWeights>& layers);
  // Frontier ops W runs; 0 when it backs up the whole layer.
  std::size_t frontierOps() const;

 private:
  struct Frontier;
  ::torch::Tensor output_, grad_;
  std::vector<::torch::Tensor> params_;
  std::vector<Frontier> frontier_;
};

}  // namespace gyre::torch::pipeline
