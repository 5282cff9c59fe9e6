// Large-batch optimizers with a layer-wise trust ratio, beside libtorch's SGD and Adam: each
// parameter tensor (a layer's weight) gets its own step size from the ratio of its weights' norm
// to its update's norm, so that no layer moves by more than a fixed fraction of itself however
// large the batch (and the learning rate that comes with it) grows.
//
//   LARS (You, Gitman and Ginsburg 2017, "Large Batch Training of Convolutional Networks"): SGD
//   with momentum whose gradient g + wd·w is scaled per tensor by
//       trust = eta · ‖w‖ / (‖g‖ + wd·‖w‖ + eps).
//   LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"): Adam's bias-corrected
//   direction r = m̂ / (√v̂ + eps) + wd·w, scaled per tensor by trust = ‖w‖ / ‖r‖, so every
//   adapted tensor moves by exactly lr·‖w‖.
//
// Tensors of one dimension (biases, normalisation scales) are not adapted (trust 1) and get no
// weight decay, as in both papers' reference implementations; `adapt_vectors` changes that. A
// tensor whose norm, or whose update's norm, is zero has trust 1.
//
// Both save and load their state like libtorch's optimizers (torch::save, checkpoints), and work
// under DistributedOptimizer; not with shardOptimizerState, which splits tensors elementwise
// and so cannot take a whole tensor's norm.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace gyre::torch {

struct LarsOptions : public ::torch::optim::OptimizerCloneableOptions<LarsOptions> {
  LarsOptions(double lr = 0.1);  // NOLINT(google-explicit-constructor): like libtorch's options
  TORCH_ARG(double, lr) = 0.1;
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(double, eta) = 0.001;  // the trust coefficient
  TORCH_ARG(double, eps) = 1e-9;
  TORCH_ARG(bool, adapt_vectors) = false;

 public:
  void serialize(::torch::serialize::InputArchive& archive) override;
  void serialize(::torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LarsParamState : public ::torch::optim::OptimizerCloneableParamState<LarsParamState> {
  TORCH_ARG(::torch::Tensor, momentum_buffer);

 public:
  void serialize(::torch::serialize::InputArchive& archive) override;
  void serialize(::torch::serialize::OutputArchive& archive) const override;
};

class Lars : public ::torch::optim::Optimizer {
 public:
  // Throws InvalidArgument for a negative or non-finite option, or momentum outside [0, 1).
  explicit Lars(std::vector<::torch::optim::OptimizerParamGroup> groups, LarsOptions defaults = {});
  explicit Lars(std::vector<::torch::Tensor> params, LarsOptions defaults = {});

  ::torch::Tensor step(LossClosure closure = nullptr) override;
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;
};

struct LambOptions : public ::torch::optim::OptimizerCloneableOptions<LambOptions> {
  LambOptions(double lr = 1e-3);  // NOLINT(google-explicit-constructor): like libtorch's options
  TORCH_ARG(double, lr) = 1e-3;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(bool, adapt_vectors) = false;

 public:
  void serialize(::torch::serialize::InputArchive& archive) override;
  void serialize(::torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LambParamState : public ::torch::optim::OptimizerCloneableParamState<LambParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(::torch::Tensor, exp_avg);
  TORCH_ARG(::torch::Tensor, exp_avg_sq);

 public:
  void serialize(::torch::serialize::InputArchive& archive) override;
  void serialize(::torch::serialize::OutputArchive& archive) const override;
};

// One parameter tensor's update, as Lars::step and Lamb::step make it (for optimizers that keep
// their state elsewhere, such as gyre.torch.LARS/LAMB in Python): p moves in place. LARS takes the
// momentum buffer (undefined on the first step) and returns it, updated; LAMB updates its moments
// in place, `step` counting from 1.
::torch::Tensor larsUpdate(const ::torch::Tensor& p, const ::torch::Tensor& grad, ::torch::Tensor momentumBuffer,
                           const LarsOptions& options);
void lambUpdate(const ::torch::Tensor& p, const ::torch::Tensor& grad, const ::torch::Tensor& expAvg,
                const ::torch::Tensor& expAvgSq, std::int64_t step, const LambOptions& options);

class Lamb : public ::torch::optim::Optimizer {
 public:
  // Throws InvalidArgument for a negative or non-finite option, or a beta outside [0, 1).
  explicit Lamb(std::vector<::torch::optim::OptimizerParamGroup> groups, LambOptions defaults = {});
  explicit Lamb(std::vector<::torch::Tensor> params, LambOptions defaults = {});

  ::torch::Tensor step(LossClosure closure = nullptr) override;
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;
};

}  // namespace gyre::torch
