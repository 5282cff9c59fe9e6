// Fully sharded data parallelism (ZeRO stage 3, as PyTorch's FSDP): every rank keeps only its
// 1/W of each layer's parameters, of their gradients and of the optimizer's state.
//
//   auto model = makeModel();                       // the same on every rank (seed, or broadcast)
//   gyre::torch::FullyShardedModel sharded(comm, model);
//   auto adam = std::make_shared<torch::optim::Adam>(sharded.parameters(), torch::optim::AdamOptions(lr));
//   ... sharded.zeroGrad(); loss_fn(sharded.forward(x), y).backward(); sharded.synchronize(); adam->step();
//
// How it works. Each child of the Sequential that has parameters is a unit. A unit's float32
// parameters live in one flat buffer of W × chunk elements whose memory is released whenever the
// unit is not computing: the parameters' tensors stay the same (autograd's saved tensors still
// point at them), only their storage comes and goes. What a rank owns is a shard, one flat
// tensor of `chunk` elements per unit: the tensors parameters() returns, which the optimizer steps.
// - forward(): before each unit, its full parameters are allgathered from the shards (the next
//   unit's allgather is started at once, so it overlaps this unit's computation) and released
//   after it, except the last unit's, which backward needs first.
// - backward: a hook on each unit's output runs before the unit's backward pass: it allgathers
//   the unit's parameters again (prefetching the unit before it), and releases those of the units
//   whose backward is done. As each parameter's gradient arrives it is copied into the unit's flat
//   gradient buffer and dropped; when the unit has all of them the buffer is reduce-scattered
//   (averaged) on a second communicator, overlapping the rest of the backward pass, and freed
//   once done. Reduce-scatters go out strictly from the last unit to the first on every rank.
// - synchronize(): waits for the reduce-scatters; each shard's grad() then holds its part of the
//   gradient averaged over the ranks, added to what it held (zeroGrad() clears it). Call it once
//   after every backward pass.
// Units without parameters run as they are. Parameters that get no gradient are reduced as zeros.
//
// Outside forward and backward the model's parameters hold no memory: reading them needs
// gatherParameters() first. Destroying a FullyShardedModel leaves them as they are (without
// memory, unless gatherParameters() was the last call). Buffers (batch norm statistics) stay on
// every rank as they are.
//
// The optimizer must be elementwise (SGD, Adam, AdamW, Adagrad, RMSprop): it sees flat shards,
// not layers. Thread-safety: one training thread; the hooks run on autograd's.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/torch/flat_state.h"
#include "gyre/torch/step_timing.h"
#include "gyre/torch/timeline.h"

namespace gyre::torch {

struct FullyShardedOptions {
  // Start the next unit's allgather while this one computes (forward and backward).
  bool prefetch = true;
  // At most this many reduce-scatters in flight (each holds a unit's whole gradient): the backward
  // pass waits for the oldest before it issues another, so that memory stays bounded where the
  // computation outruns the communication (PyTorch FSDP's limit_all_gathers, for gradients). Zero:
  // no limit.
  int scattersInFlight = 2;
  // Time-out of each collective; zero: the communicator's.
  Timeout timeout{0};
  // Where to record the allgathers, reduce-scatters and waits (may be null).
  std::shared_ptr<Timeline> timeline;
};

// This rank's shard of `unit`'s parameters (those FullyShardedModel shards: float32, requiring a
// gradient), as FullyShardedModel cuts it, with those parameters' memory given back
// (gyre/torch/deferred.h); undefined for a unit without any. Its buffers stay.
::torch::Tensor takeShard(::torch::nn::Module& unit, int rank, int world);

class FullyShardedModel {
 public:
  // Shards `model`'s parameters that require a gradient (float32 only; every rank passes the same
  // model with the same values, as after broadcastParameters). Collective: it checks that every
  // rank has the same parameters (as DistributedOptimizer does) and splits the communicator once
  // (the reduce-scatters' own). Throws InvalidArgument for non-float32 or non-CPU parameters.
  FullyShardedModel(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model,
                    FullyShardedOptions options = {});
  // The same for a model no rank made whole: each child with parameters gave its shard to
  // takeShard() as soon as it was made (every rank drawing every child, in the same order), and
  // `shards` holds them in the children's order. Checks shapes across ranks, not values.
  FullyShardedModel(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model,
                    std::vector<::torch::Tensor> shards, FullyShardedOptions options = {});
  ~FullyShardedModel();
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;

  // The model's forward pass, unit by unit, each with its full parameters. Collective: every rank
  // calls it as often, with or without gradients alike.
  ::torch::Tensor forward(const ::torch::Tensor& input);
  // This rank's shards, one flat tensor per unit with parameters: what the optimizer steps.
  std::vector<::torch::Tensor> parameters() const;
  // Where each shard of parameters() lies in `params` (the whole model's parameters, in any
  // order): what a checkpoint records so that another layout can resume it (flat_state.h).
  FlatLayout shardLayout(const std::vector<::torch::Tensor>& params) const;
  // Clears the shards' gradients (undefined, as libtorch's zero_grad()).
  void zeroGrad();
  // After a backward pass through forward()'s output: issues the reduce-scatters not yet issued,
  // waits for all, and adds each unit's averaged part to its shard's grad(). Collective.
  void synchronize();
  // Every unit's full parameters into the model's tensors, kept until the next forward() (to
  // save or inspect the whole model). Collective.
  void gatherParameters();
  // The same onto `root` alone (the others' stay without memory): the whole model in one worker
  // once training is done, when no worker could hold it beside its training state. Collective;
  // the last one: the ranks no longer agree on what is gathered, so forward() must not follow.
  void gatherParametersOnto(int root);

  // Bytes this rank holds for the model's training state now: the shards, their gradients and
  // whatever full parameters or gradient buffers are materialised (the optimizer's state aside).
  std::size_t stateBytes() const;
  // The bytes of the unsharded parameters (float32 ones that require a gradient).
  std::size_t fullParameterBytes() const;

  // Timing of the last synchronize() and totals since construction or resetTiming(): wait is
  // the time blocked on allgathers and reduce-scatters (forward, backward and synchronize()).
  const StepTiming& lastStep() const;
  const StepTiming& totals() const;
  void resetTiming();

  ::torch::nn::Sequential& module();
  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::torch
