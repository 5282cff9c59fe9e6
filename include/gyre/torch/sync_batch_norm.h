// Batch normalisation whose batch statistics cover every rank's batch (SyncBatchNorm, as
// torch.nn.SyncBatchNorm): in training, the mean and variance of each channel are taken over the
// global batch (one allreduce of the per-channel sums and sums of squares, with the element
// counts, so ranks may hold batches of different sizes), and backward reduces the two
// per-channel sums its input gradient needs. W ranks each holding a slice of a batch then compute
// what one process computes on the whole batch: the same outputs, the same running statistics on
// every rank, and, once DistributedOptimizer has averaged them, the same gradients.
//
//   auto bn = gyre::torch::SyncBatchNorm(gyre::torch::SyncBatchNormOptions(64));
//   ... build the model with it, then, for each communicator the model trains in:
//   gyre::torch::setSyncBatchNormCommunicator(*model, comm);
//
// Without a communicator (or with one rank) it is plain batch normalisation. In eval mode it
// uses the running statistics and communicates nothing. The reductions travel on the given
// communicator in autograd's order, the same on every rank, interleaved with
// DistributedOptimizer's bucket allreduces on the same communicator: every rank must run the
// same layers in the same order (as for any collective).
//
// Thread-safety: one training thread per module, as any libtorch module.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "gyre/communicator.h"

namespace gyre::torch {

struct SyncBatchNormOptions {
  SyncBatchNormOptions(std::int64_t numFeatures);  // NOLINT(google-explicit-constructor): as libtorch's
  TORCH_ARG(std::int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(double, momentum) = 0.1;  // running = (1 - momentum) * running + momentum * batch
};

class SyncBatchNormImpl : public ::torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  explicit SyncBatchNormImpl(SyncBatchNormOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  // [N, C, ...] in, the same shape out. Throws InvalidArgument when the input has no channel
  // dimension or another number of channels, or when a training batch has one element per
  // channel over every rank (no variance).
  ::torch::Tensor forward(const ::torch::Tensor& input);

  // The communicator whose ranks share the statistics; null: this process alone.
  void setCommunicator(std::shared_ptr<Communicator> comm) { comm_ = std::move(comm); }
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }

  SyncBatchNormOptions options;
  ::torch::Tensor weight, bias;               // parameters, [C]
  ::torch::Tensor running_mean, running_var;  // buffers, [C]
  ::torch::Tensor num_batches_tracked;        // buffer, a count

 private:
  std::shared_ptr<Communicator> comm_;
};
// The module holder, as TORCH_MODULE(SyncBatchNorm) would write it (the macro names
// torch::nn unqualified, which means gyre::torch::nn in here).
class SyncBatchNorm : public ::torch::nn::ModuleHolder<SyncBatchNormImpl> {
 public:
  using ::torch::nn::ModuleHolder<SyncBatchNormImpl>::ModuleHolder;
  using Impl = SyncBatchNormImpl;
};

// Gives every SyncBatchNorm inside `module` (itself included) this communicator: call it whenever
// the model starts training in a new one (an elastic membership). Returns how many it found.
int setSyncBatchNormCommunicator(::torch::nn::Module& module, const std::shared_ptr<Communicator>& comm);

}  // namespace gyre::torch
