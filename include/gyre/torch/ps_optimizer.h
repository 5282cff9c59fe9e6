// Training a libtorch model through the parameter server (gyre/ps.h, docs/ps.md): the parameters
// live on the servers, which apply the optimizer (SGD with momentum, Adam) to their shards; each
// worker pushes its gradients and pulls the new values. The same few lines as the
// DistributedOptimizer:
//
//   auto params = model->parameters();
//   gyre::ps::OptimizerOptions sgd;
//   sgd.momentum = 0.9f;
//   auto spec = gyre::torch::PSOptimizer::tableFor(params, gyre::ps::Mode::parse("asp"), sgd);
//   gyre::torch::PSOptimizer opt(params, gyre::ps::Worker::fromEnvironment(spec), lr);
//   ... opt.zeroGrad(); loss.backward(); opt.step();
//
// One key per parameter, in the order given (every worker must pass the same model, parameters
// in the same order). Parameters must be float32, dense, contiguous and on the CPU: the pulls
// write the servers' values straight into the parameters' storage, no copy.
//
// How a step goes. A hook after each parameter's gradient accumulation pushes that gradient at
// once (asynchronously), so the pushes overlap the rest of the backward pass, as the
// DistributedOptimizer's allreduces do. step() pushes what backward did not produce (a
// parameter with no gradient pushes zeros, so that under bsp every worker's step is complete for
// every key; the server's momentum then still moves it, where libtorch's SGD would skip it),
// calls Worker::clock() (which waits for the pushes and, under ssp, for the slowest worker), then
// pulls every key into its parameter and waits. Afterwards the model holds the parameters the
// mode promises: under bsp the result of every worker's step; under asp/ssp the latest values.
//
// One backward pass per step: the gradient a hook pushes must stay untouched until its push
// completed, so a second backward pass into a gradient already pushed throws from backward().
//
// Thread-safety: one training thread drives an optimizer; hooks run on autograd's threads.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "gyre/ps.h"
#include "gyre/torch/step_timing.h"

namespace gyre::torch {

struct PSOptimizerOptions {
  // Push each gradient from its hook as soon as backward produced it (true), or all of them in
  // step() (false: no hooks, the parameters' gradients may be edited between backward and step,
  // for clipping).
  bool pushFromHooks = true;
};

class PSOptimizer {
 public:
  // The table of `params`: one float32 key per parameter, in order. Throws InvalidArgument for a
  // parameter that is undefined, not float32, sparse, not contiguous or not on the CPU.
  static ps::TableSpec tableFor(const std::vector<::torch::Tensor>& params, ps::Mode mode,
                                ps::OptimizerOptions optimizer);

  // Trains `params` through `worker` (shared: the caller may keep it, for stats(); the optimizer
  // keeps it alive), whose table must be tableFor(params, ...). Worker 0 initialises every key
  // from the parameters' current values; then every worker pulls them, so all start from worker
  // 0's model. Blocks until then. Throws InvalidArgument for parameters tableFor refuses or a
  // table that does not fit them, and the worker's errors (TimeoutError, PeerLostError, ...).
  PSOptimizer(std::vector<::torch::Tensor> params, std::shared_ptr<ps::Worker> worker, double lr,
              PSOptimizerOptions options = {});
  ~PSOptimizer();
  PSOptimizer(const PSOptimizer&) = delete;
  PSOptimizer& operator=(const PSOptimizer&) = delete;

  // Sets every gradient to undefined, as libtorch's zero_grad().
  void zeroGrad();
  // Pushes the gradients not pushed yet, ends the step (Worker::clock()), pulls every parameter
  // and waits. Throws the worker's errors (TimeoutError, PeerLostError, ProtocolError).
  void step();

  // The rate the next pushes carry (a push from a hook carries the rate set when its gradient
  // became ready: set it before backward). The servers apply it, so schedules work.
  void setLearningRate(double lr);
  double learningRate() const;

  // Timing of the last step() and totals since construction or resetTiming(), in the
  // DistributedOptimizer's terms: wait is the time step() blocked (on pushes, the clock and
  // pulls); communicate runs from the step's first push to its pulls' end (communicate - wait:
  // what the backward pass hid); bytes are pushed plus pulled; buckets counts the requests.
  const StepTiming& lastStep() const;
  const StepTiming& totals() const;
  void resetTiming();

  ps::Worker& worker();
  const std::vector<::torch::Tensor>& parameters() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::torch
