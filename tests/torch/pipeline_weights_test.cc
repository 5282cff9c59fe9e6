// Zero-bubble's deferred weight gradients (src/torch/pipeline_weights.h): after the input pass
// the parameters have no gradient yet, after W exactly a whole backward's, and for a layer of
// many ops W runs only the ops that feed parameters, a weight fed twice getting both uses' sum.
#include "torch/pipeline_weights.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "gyre/torch/module.h"
#include "torch/tensor_checks.h"

namespace gyre::torch::pipeline {
namespace {

namespace nn = ::torch::nn;
using ::torch::Tensor;

// A pre-norm residual block of many ops: x + fc2(gelu(fc1(norm(x)))).
struct BlockImpl : nn::Module {
  BlockImpl()
      : norm(register_module("norm", nn::LayerNorm(nn::LayerNormOptions({16})))),
        fc1(register_module("fc1", nn::Linear(16, 32))),
        fc2(register_module("fc2", nn::Linear(32, 16))) {}
  Tensor forward(const Tensor& x) { return x + fc2(::torch::gelu(fc1(norm(x)))); }
  nn::LayerNorm norm;
  nn::Linear fc1, fc2;
};
GYRE_TORCH_MODULE(Block);

// The same linear layer twice: its weight is fed through two ops.
struct TwiceImpl : nn::Module {
  TwiceImpl() : fc(register_module("fc", nn::Linear(16, 16))) {}
  Tensor forward(const Tensor& x) { return fc(::torch::tanh(fc(x))); }
  nn::Linear fc;
};
GYRE_TORCH_MODULE(Twice);

std::vector<Tensor> gradsOf(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  return out;
}

// The input gradient first, the weights later, against one whole backward.
template <typename Layer>
void checkDeferred(Layer layer, std::size_t minFrontier, std::size_t maxFrontier) {
  ::torch::manual_seed(3);
  const Tensor x = ::torch::randn({4, 5, 16});
  const Tensor g = ::torch::randn({4, 5, 16});
  const std::vector<Tensor> params = layer->parameters();

  Tensor leaf = x.clone().requires_grad_(true);
  layer->forward(leaf).backward(g);
  const std::vector<Tensor> wantParams = gradsOf(params);
  const Tensor wantInput = leaf.grad().clone();
  layer->zero_grad();
  for (const Tensor& p : params) p.mutable_grad() = Tensor();

  leaf = x.clone().requires_grad_(true);
  const Tensor y = layer->forward(leaf);
  DeferredWeights w(y, g, params, leaf);
  EXPECT_GE(w.frontierOps(), minFrontier);
  EXPECT_LE(w.frontierOps(), maxFrontier);
  const Tensor gotInput = ::torch::autograd::grad({y}, {leaf}, {g}, /*retain_graph=*/true)[0];
  EXPECT_TRUE(::torch::allclose(gotInput, wantInput, 1e-5, 1e-6));
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined()) << "a weight gradient before W";
  std::vector<DeferredWeights> layers;
  layers.push_back(std::move(w));
  DeferredWeights::run(layers);
  test::expectClose(gradsOf(params), wantParams, 1e-5, "deferred weight gradients");
}

TEST(PipelineWeights, AManyOpLayersWeightsRunOpByOp) {
  // The layer norm, both matrix products and the bias additions that feed parameters.
  checkDeferred(Block(), 3, 6);
}

TEST(PipelineWeights, AWeightFedTwiceGetsBothUses) {
  checkDeferred(Twice(), 2, 4);  // per use: the product, and the bias where it is added apart
}

TEST(PipelineWeights, WithoutAnInputPassWIsTheWholeBackward) {
  Block layer;
  const Tensor x = ::torch::randn({2, 3, 16});
  const Tensor y = layer->forward(x).sum();
  DeferredWeights w(y, Tensor(), layer->parameters(), x);
  EXPECT_EQ(w.frontierOps(), 0u);
  std::vector<DeferredWeights> layers;
  layers.push_back(std::move(w));
  DeferredWeights::run(layers);
  for (const Tensor& p : layer->parameters()) EXPECT_TRUE(p.grad().defined());
}

}  // namespace
}  // namespace gyre::torch::pipeline
