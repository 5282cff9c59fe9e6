// The seam both optimizers of this folder hang their communication on: a post-hook on each
// parameter's gradient accumulator, so that onReady(i) runs (on autograd's thread) as soon as
// autograd has accumulated parameter i's gradient in backward. DistributedOptimizer copies the
// gradient into its bucket and starts the bucket's allreduce when it is full; PSOptimizer pushes
// it to the servers. Megatron-Core keeps the same split between its grad buffer's hooks and its
// distributed optimizer.
//
// Thread-safety: install() and remove() on the training thread, with no backward running;
// onReady is called from autograd's thread and must do its own locking.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace gyre::torch {

class GradientHooks {
 public:
  using OnReady = std::function<void(std::size_t index)>;

  GradientHooks() = default;
  ~GradientHooks() { remove(); }
  GradientHooks(const GradientHooks&) = delete;
  GradientHooks& operator=(const GradientHooks&) = delete;

  // Hooks params[i] for every i (or every i for which `wanted(i)` is true) to call onReady(i).
  // Throws InvalidArgument "OWNER: parameter I is not a leaf" for a parameter autograd holds no
  // accumulator for. Calls before remove() add hooks.
  void install(const std::vector<::torch::Tensor>& params, const OnReady& onReady, const char* owner,
               const std::function<bool(std::size_t)>& wanted = {});
  // Takes every hook off; idempotent. The hooks keep their accumulators alive until then (a
  // parameter holds its accumulator only weakly).
  void remove();

 private:
  struct Hook {
    std::shared_ptr<::torch::autograd::Node> accumulator;
    std::uintptr_t handle = 0;
  };
  std::vector<Hook> hooks_;
};

}  // namespace gyre::torch
