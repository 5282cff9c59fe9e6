#include "torch/gradient_hooks.h"

#include <torch/csrc/autograd/function_hook.h>

#include "common/check.h"

namespace gyre::torch {
namespace {

// Runs after autograd has accumulated one parameter's gradient.
class ReadyHook final : public ::torch::autograd::FunctionPostHook {
 public:
  ReadyHook(GradientHooks::OnReady onReady, std::size_t index)
      : onReady_(std::move(onReady)), index_(index) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    onReady_(index_);
    return outputs;
  }

 private:
  GradientHooks::OnReady onReady_;
  std::size_t index_;
};

}  // namespace

void GradientHooks::install(const std::vector<::torch::Tensor>& params, const OnReady& onReady,
                            const char* owner, const std::function<bool(std::size_t)>& wanted) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (wanted && !wanted(i)) continue;
    Hook hook;
    hook.accumulator = ::torch::autograd::impl::grad_accumulator(params[i]);
    GYRE_USAGE_CHECK(hook.accumulator != nullptr, owner, ": parameter ", i, " is not a leaf");
    hook.handle = hook.accumulator->add_post_hook(std::make_unique<ReadyHook>(onReady, i));
    hooks_.push_back(std::move(hook));
  }
}

void GradientHooks::remove() {
  for (Hook& hook : hooks_) hook.accumulator->del_post_hook(hook.handle);
  hooks_.clear();
}

}  // namespace gyre::torch
