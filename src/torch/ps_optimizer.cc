#include "gyre/torch/ps_optimizer.h"

#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <string>

#include "common/check.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "gyre/errors.h"
#include "torch/gradient_hooks.h"

namespace gyre::torch {
namespace {

using Clock = std::chrono::steady_clock;

void checkParameter(const ::torch::Tensor& param, std::size_t index) {
  GYRE_USAGE_CHECK(param.defined(), "PSOptimizer: parameter ", index, " is undefined");
  GYRE_USAGE_CHECK(!param.is_sparse(), "PSOptimizer: parameter ", index, " is sparse; only dense ones are supported");
  GYRE_USAGE_CHECK(param.device().is_cpu(), "PSOptimizer: parameter ", index, " lives on ", param.device().str(),
                   ", not on the CPU");
  GYRE_USAGE_CHECK(param.scalar_type() == ::torch::kFloat32, "PSOptimizer: parameter ", index, " is ",
                   c10::toString(param.scalar_type()), "; the parameter server holds float32 only");
  GYRE_USAGE_CHECK(param.is_contiguous(), "PSOptimizer: parameter ", index,
                   " is not contiguous (the pulls write straight into its storage)");
}

// Waits for every Work, then rethrows the first failure.
void waitAll(std::vector<std::shared_ptr<Work>>& works) {
  std::exception_ptr failure;
  for (auto& work : works) {
    if (!work) continue;
    try {
      work->wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  works.clear();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

// State shared by the hooks (autograd's thread) and the training thread.
class PSOptimizer::Impl {
 public:
  struct Slot {
    ::torch::Tensor param;
    ::torch::Tensor pushed;  // the gradient in flight, kept alive until its push completed
    std::shared_ptr<Work> push;
    ::torch::Tensor zeros;  // pushed for a parameter with no gradient (made the first time)
  };

  Impl(std::vector<::torch::Tensor> params, std::shared_ptr<ps::Worker> worker, double lr,
       PSOptimizerOptions options);
  ~Impl();

  void onGradientReady(std::size_t index) GYRE_EXCLUDES(mu_);
  void step() GYRE_EXCLUDES(mu_);

  std::shared_ptr<ps::Worker> worker_;
  PSOptimizerOptions options_;
  std::vector<::torch::Tensor> params_;
  // The post-hooks that call onGradientReady (pushFromHooks): the training thread's alone.
  GradientHooks hooks_;
  mutable Mutex mu_;
  std::vector<Slot> slots_ GYRE_GUARDED_BY(mu_);
  float lr_ GYRE_GUARDED_BY(mu_);
  Clock::time_point stepBegin_ GYRE_GUARDED_BY(mu_);
  Clock::time_point firstPush_ GYRE_GUARDED_BY(mu_){};
  // The training thread's own: written under mu_ by step(), read without it by lastStep() and
  // totals() (on that same thread).
  StepTiming last_;
  StepTiming totals_;

 private:
  // Sends slot `index`'s gradient (or zeros).
  void push(std::size_t index, const ::torch::Tensor& grad) GYRE_REQUIRES(mu_);
  void pullAll() GYRE_REQUIRES(mu_);
};

ps::TableSpec PSOptimizer::tableFor(const std::vector<::torch::Tensor>& params, ps::Mode mode,
                                    ps::OptimizerOptions optimizer) {
  GYRE_USAGE_CHECK(!params.empty(), "PSOptimizer: no parameters to train");
  ps::TableSpec spec;
  for (std::size_t i = 0; i < params.size(); ++i) {
    checkParameter(params[i], i);
    spec.sizes.push_back(static_cast<std::size_t>(params[i].numel()));
    spec.shapes.push_back(params[i].sizes().vec());
  }
  spec.mode = mode;
  spec.optimizer = optimizer;
  return spec;
}

PSOptimizer::Impl::Impl(std::vector<::torch::Tensor> params, std::shared_ptr<ps::Worker> worker, double lr,
                        PSOptimizerOptions options)
    : worker_(std::move(worker)), options_(options), params_(std::move(params)), lr_(static_cast<float>(lr)) {
  GYRE_USAGE_CHECK(worker_ != nullptr, "PSOptimizer needs a parameter-server worker");
  GYRE_USAGE_CHECK(std::isfinite(lr) && lr >= 0, "PSOptimizer: the learning rate must be a finite, non-negative "
                   "number (got ", lr, ")");
  const ps::TableSpec want = tableFor(params_, worker_->spec().mode, worker_->spec().optimizer);
  const bool shapesFit = worker_->spec().shapes.empty() || worker_->spec().shapes == want.shapes;
  GYRE_USAGE_CHECK(want.sizes == worker_->spec().sizes && shapesFit, "PSOptimizer: the worker's table has ",
                   worker_->spec().sizes.size(), " keys that do not match the ", params_.size(),
                   " parameters given: build it with PSOptimizer::tableFor(parameters, ...)");
  for (const ::torch::Tensor& param : params_) {
    Slot slot;
    slot.param = param;
    slots_.push_back(std::move(slot));
  }
  // Worker 0's values are everyone's start.
  std::vector<std::shared_ptr<Work>> works;
  if (worker_->workerId() == 0) {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      works.push_back(worker_->init(static_cast<int>(i), slots_[i].param.data_ptr<float>()));
    waitAll(works);
  }
  pullAll();
  if (options_.pushFromHooks) {
    // A parameter that does not require a gradient never gets one: step() pushes zeros for it.
    hooks_.install(
        params_, [this](std::size_t index) { onGradientReady(index); }, "PSOptimizer",
        [this](std::size_t index) { return params_[index].requires_grad(); });
  }
  stepBegin_ = Clock::now();
}

PSOptimizer::Impl::~Impl() {
  hooks_.remove();
  // The worker may still read the gradients in flight (each push is bounded by its time-out).
  for (Slot& slot : slots_) {
    if (!slot.push) continue;
    try {
      slot.push->wait();
    } catch (...) {  // reported, if anyone asked, by step()
    }
  }
}

void PSOptimizer::Impl::push(std::size_t index, const ::torch::Tensor& grad) {
  Slot& slot = slots_[index];
  if (grad.defined()) {
    // The pushed buffer must hold the parameter's layout: autograd's gradients of contiguous
    // parameters normally are already, with no copy.
    slot.pushed = grad.scalar_type() == ::torch::kFloat32 && grad.is_contiguous() && !grad.is_sparse()
                      ? grad
                      : grad.to_dense().to(::torch::kFloat32).contiguous();
  } else {
    if (!slot.zeros.defined()) slot.zeros = ::torch::zeros_like(slot.param);
    slot.pushed = slot.zeros;
  }
  GYRE_USAGE_CHECK(slot.pushed.numel() == slot.param.numel(), "PSOptimizer: gradient ", index, " has ",
                   slot.pushed.numel(), " elements, its parameter ", slot.param.numel());
  const auto now = Clock::now();
  if (firstPush_ == Clock::time_point{}) firstPush_ = now;
  slot.push = worker_->push(static_cast<int>(index), slot.pushed.data_ptr<float>(), lr_);
}

void PSOptimizer::Impl::onGradientReady(std::size_t index) {
  MutexLock lock(mu_);
  Slot& slot = slots_[index];
  GYRE_USAGE_CHECK(!slot.push, "PSOptimizer: parameter ", index,
                   " got a second gradient before step(): one backward pass per step (its first gradient "
                   "is already on its way to the servers)");
  ::torch::NoGradGuard noGrad;
  push(index, slot.param.grad());
}

void PSOptimizer::Impl::pullAll() {
  std::vector<std::shared_ptr<Work>> works;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    works.push_back(worker_->pull(static_cast<int>(i), slots_[i].param.data_ptr<float>()));
  waitAll(works);
  // The parameters changed behind autograd's back: a graph that saved them must notice.
  for (Slot& slot : slots_) ::torch::autograd::impl::bump_version(slot.param);
}

void PSOptimizer::Impl::step() {
  MutexLock lock(mu_);
  const auto begin = Clock::now();
  StepTiming timing;
  timing.steps = 1;
  std::exception_ptr failure;
  {
    ::torch::NoGradGuard noGrad;
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].push) push(i, slots_[i].param.grad());
  }
  std::vector<std::shared_ptr<Work>> pushes;
  for (Slot& slot : slots_) pushes.push_back(std::move(slot.push));
  try {
    worker_->clock();  // waits for the pushes; under ssp, for the slowest worker too
    waitAll(pushes);   // their failures
  } catch (...) {
    failure = std::current_exception();
  }
  for (Slot& slot : slots_) {
    slot.push.reset();
    slot.pushed = ::torch::Tensor();
  }
  if (failure) std::rethrow_exception(failure);
  pullAll();
  const auto end = Clock::now();
  const std::size_t bytes = [&]() GYRE_REQUIRES(mu_) {
    std::size_t total = 0;
    for (const Slot& slot : slots_) total += static_cast<std::size_t>(slot.param.nbytes());
    return total;
  }();
  timing.wait = seconds(end - begin);
  timing.communicate = seconds(end - firstPush_);
  timing.bytes = 2 * bytes;
  timing.buckets = 2 * slots_.size();
  timing.step = seconds(end - stepBegin_);
  timing.compute = timing.step - timing.wait;
  firstPush_ = Clock::time_point{};
  stepBegin_ = end;
  last_ = timing;
  totals_ += timing;
}

PSOptimizer::PSOptimizer(std::vector<::torch::Tensor> params, std::shared_ptr<ps::Worker> worker, double lr,
                         PSOptimizerOptions options)
    : impl_(std::make_unique<Impl>(std::move(params), std::move(worker), lr, options)) {}

PSOptimizer::~PSOptimizer() = default;

void PSOptimizer::zeroGrad() {
  MutexLock lock(impl_->mu_);
  for (auto& slot : impl_->slots_) slot.param.mutable_grad().reset();
}

void PSOptimizer::step() { impl_->step(); }

void PSOptimizer::setLearningRate(double lr) {
  GYRE_USAGE_CHECK(std::isfinite(lr) && lr >= 0, "PSOptimizer: the learning rate must be a finite, non-negative "
                   "number (got ", lr, ")");
  MutexLock lock(impl_->mu_);
  impl_->lr_ = static_cast<float>(lr);
}

double PSOptimizer::learningRate() const {
  MutexLock lock(impl_->mu_);
  return impl_->lr_;
}

const StepTiming& PSOptimizer::lastStep() const { return impl_->last_; }
const StepTiming& PSOptimizer::totals() const { return impl_->totals_; }

void PSOptimizer::resetTiming() {
  MutexLock lock(impl_->mu_);
  impl_->totals_ = StepTiming{};
  impl_->stepBegin_ = Clock::now();
}

ps::Worker& PSOptimizer::worker() { return *impl_->worker_; }
const std::vector<::torch::Tensor>& PSOptimizer::parameters() const { return impl_->params_; }

}  // namespace gyre::torch
