#include "gyre/torch/fully_sharded.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/check.h"
#include "common/mutex.h"
#include "torch/parameter_check.h"
#include "torch/storage.h"

namespace gyre::torch {
namespace {

using Clock = std::chrono::steady_clock;

double secondsIn(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What FullyShardedModel shards of a unit: its parameters that require a gradient.
std::vector<::torch::Tensor> shardedParameters(const ::torch::nn::Module& unit) {
  std::vector<::torch::Tensor> out;
  for (const auto& p : unit.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// Each rank's share of a unit of `used` elements (padded: the last ranks' may hold fewer).
std::int64_t chunkOf(std::int64_t used, std::int64_t world) { return (used + world - 1) / world; }

}  // namespace

class FullyShardedModel::Impl {
 public:
  // A child of the Sequential with parameters to shard.
  struct Unit {
    std::size_t child = 0;                // its place in the Sequential
    std::vector<::torch::Tensor> params;  // their storage is full's
    std::vector<std::int64_t> offsets;    // each one's first element in full
    std::int64_t used = 0;                // elements that belong to parameters
    std::int64_t chunk = 0;               // each rank's share; full holds W × chunk
    ::torch::Tensor full;                 // the unit's parameters, padded; memory only while gathered
    ::torch::Tensor shard;                // this rank's chunk: the optimizer's parameter
    bool gathered = false;
    std::shared_ptr<Work> gather;  // the allgather in flight into full
    // Backward: the unit's gradients as they arrive (padded), reduce-scattered into `reduced`.
    ::torch::Tensor gradFull;
    std::vector<bool> arrived;
    std::size_t arrivals = 0;  // of arrived's
    ::torch::Tensor reduced;
    std::shared_ptr<Work> scatter;
    std::vector<std::shared_ptr<::torch::autograd::Node>> accumulators;  // kept alive: hooks hang there
    std::vector<std::uintptr_t> hooks;
  };

  Impl(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model, std::vector<::torch::Tensor> shards,
       FullyShardedOptions options);
  ~Impl();

  ::torch::Tensor forward(const ::torch::Tensor& input) GYRE_EXCLUDES(mu_);
  void beforeBackward(std::size_t u) GYRE_EXCLUDES(mu_);
  void onGradient(std::size_t u, std::size_t p) GYRE_EXCLUDES(mu_);
  void synchronize() GYRE_EXCLUDES(mu_);
  void gatherAll() GYRE_EXCLUDES(mu_);
  void gatherOnto(int root) GYRE_EXCLUDES(mu_);
  std::size_t stateBytes() const GYRE_EXCLUDES(mu_);

  std::shared_ptr<Communicator> comm_;     // the allgathers
  std::shared_ptr<Communicator> scatter_;  // the reduce-scatters (their own order)
  ::torch::nn::Sequential model_;
  FullyShardedOptions options_;
  mutable Mutex mu_;
  std::vector<Unit> units_ GYRE_GUARDED_BY(mu_);
  std::vector<std::size_t> unitOf_;  // each child's unit + 1, 0 for none (set by the constructor)
  std::size_t nextScatter_ GYRE_GUARDED_BY(mu_) = 0;  // units_.size() - the reduce-scatters issued
  StepTiming step_ GYRE_GUARDED_BY(mu_);
  StepTiming last_;
  StepTiming totals_;
  Clock::time_point stepBegin_ GYRE_GUARDED_BY(mu_) = Clock::now();

 private:
  void allocate(Unit& unit) GYRE_REQUIRES(mu_);
  // Gives back the unit's full parameters' memory (waiting for an allgather in flight); none held: nothing.
  void release(Unit& unit) GYRE_REQUIRES(mu_);
  void startGather(Unit& unit) GYRE_REQUIRES(mu_);
  // The unit's full parameters are in place (waiting for its allgather, or running it here).
  void ensureGathered(Unit& unit) GYRE_REQUIRES(mu_);
  void issueScatters() GYRE_REQUIRES(mu_);
  void issueScatter(Unit& unit) GYRE_REQUIRES(mu_);
  void finishScatter(Unit& unit) GYRE_REQUIRES(mu_);
  void waitFor(const std::shared_ptr<Work>& work) GYRE_REQUIRES(mu_);
  void record(const Work& work, const char* what, std::size_t bytes) GYRE_REQUIRES(mu_);
  CollectiveOptions collective() const;
};

namespace {

// Before a unit's backward pass: a hook on the gradient of its output.
struct BackwardHook {
  FullyShardedModel::Impl* impl;
  std::size_t unit;
  ::torch::Tensor operator()(const ::torch::Tensor& grad) const {
    impl->beforeBackward(unit);
    return grad;
  }
};

// After a parameter's gradient accumulation.
class GradientHook final : public ::torch::autograd::FunctionPostHook {
 public:
  GradientHook(FullyShardedModel::Impl* impl, std::size_t unit, std::size_t param)
      : impl_(impl), unit_(unit), param_(param) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    impl_->onGradient(unit_, param_);
    return outputs;
  }

 private:
  FullyShardedModel::Impl* impl_;
  std::size_t unit_, param_;
};

}  // namespace

FullyShardedModel::Impl::Impl(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model,
                              std::vector<::torch::Tensor> shards, FullyShardedOptions options)
    : comm_(std::move(comm)), model_(std::move(model)), options_(std::move(options)) {
  GYRE_USAGE_CHECK(comm_ != nullptr, "FullyShardedModel needs a communicator");
  GYRE_USAGE_CHECK(!model_.is_empty(), "FullyShardedModel needs a model");
  std::vector<::torch::Tensor> all;
  for (const auto& p : model_->parameters()) {
    if (!p.requires_grad()) continue;
    GYRE_USAGE_CHECK(p.device().is_cpu(), "FullyShardedModel: parameters must live on the CPU");
    GYRE_USAGE_CHECK(p.scalar_type() == ::torch::kFloat32, "FullyShardedModel shards float32 parameters; one is ",
                     c10::toString(p.scalar_type()));
    all.push_back(p);
  }
  // Before anything is cut: a rank with another model fails with the others, never alone.
  if (comm_->size() > 1) checkSameParameters(*comm_, all, {}, "FullyShardedModel", options_.timeout);
  scatter_ = comm_->split(0, comm_->rank());
  const std::int64_t world = comm_->size();
  const std::int64_t rank = comm_->rank();
  MutexLock lock(mu_);
  ::torch::NoGradGuard noGrad;
  const auto children = model_->children();
  const bool made = !shards.empty();  // the parameters hold no memory: each shard was taken
  for (std::size_t c = 0; c < children.size(); ++c) {
    Unit unit;
    unit.child = c;
    unit.params = shardedParameters(*children[c]);
    if (unit.params.empty()) continue;
    for (const auto& p : unit.params) {
      unit.offsets.push_back(unit.used);
      unit.used += p.numel();
    }
    unit.chunk = chunkOf(unit.used, world);
    GYRE_USAGE_CHECK(!made || units_.size() < shards.size(), "FullyShardedModel: ", shards.size(),
                     " shards for a model with more units");
    unit.full = made ? ::torch::empty({unit.chunk * world}) : ::torch::zeros({unit.chunk * world});
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
      ::torch::Tensor& p = unit.params[i];
      auto home = unit.full.narrow(0, unit.offsets[i], p.numel()).view(p.sizes());
      if (!made) home.copy_(p);
      p.set_data(home);  // the tensor stays (modules and autograd hold it); its storage is full's
    }
    if (made) {
      const ::torch::Tensor& taken = shards[units_.size()];
      GYRE_USAGE_CHECK(taken.defined() && taken.numel() == unit.chunk, "FullyShardedModel: shard ", units_.size(),
                       " does not have the unit's ", unit.chunk, " elements");
      unit.shard = taken.detach().requires_grad_(true);
    } else {
      unit.shard = unit.full.narrow(0, rank * unit.chunk, unit.chunk).clone().requires_grad_(true);
    }
    unit.arrived.assign(unit.params.size(), false);
    unit.gathered = true;
    release(unit);
    units_.push_back(std::move(unit));
  }
  GYRE_USAGE_CHECK(shards.empty() || shards.size() == units_.size(), "FullyShardedModel: ", shards.size(),
                   " shards for a model of ", units_.size(), " units");
  unitOf_.assign(children.size(), 0);
  for (std::size_t u = 0; u < units_.size(); ++u) unitOf_[units_[u].child] = u + 1;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
      auto accumulator = ::torch::autograd::impl::grad_accumulator(unit.params[i]);
      GYRE_USAGE_CHECK(accumulator != nullptr, "FullyShardedModel: a parameter is not a leaf");
      unit.hooks.push_back(accumulator->add_post_hook(std::make_unique<GradientHook>(this, u, i)));
      unit.accumulators.push_back(std::move(accumulator));
    }
  }
  nextScatter_ = units_.size();
}

FullyShardedModel::Impl::~Impl() {
  MutexLock lock(mu_);
  for (Unit& unit : units_) {
    for (std::size_t i = 0; i < unit.hooks.size(); ++i) unit.accumulators[i]->del_post_hook(unit.hooks[i]);
    // The communicators' threads may still write into the buffers: let them finish (each
    // collective is bounded by its time-out).
    for (auto* work : {&unit.gather, &unit.scatter}) {
      if (!*work) continue;
      try {
        (*work)->wait();
      } catch (...) {  // reported, if anyone asked, by the call that waits for it
      }
    }
  }
}

CollectiveOptions FullyShardedModel::Impl::collective() const {
  CollectiveOptions o;
  o.timeout = options_.timeout;
  return o;
}

void FullyShardedModel::Impl::allocate(Unit& unit) {
  detail::provideStorage(unit.full, static_cast<std::size_t>(unit.full.numel()) * sizeof(float));
}

void FullyShardedModel::Impl::release(Unit& unit) {
  if (!unit.gathered && !unit.gather) return;
  if (unit.gather) waitFor(unit.gather);
  unit.gather.reset();
  unit.gathered = false;
  detail::dropStorage(unit.full);
}

void FullyShardedModel::Impl::startGather(Unit& unit) {
  if (unit.gathered || unit.gather) return;
  allocate(unit);
  // In place: this rank's chunk at its place, the others' around it.
  float* full = unit.full.data_ptr<float>();
  float* mine = full + comm_->rank() * unit.chunk;
  std::copy_n(unit.shard.data_ptr<float>(), unit.chunk, mine);
  unit.gather = comm_->allgatherAsync(mine, full, static_cast<std::size_t>(unit.chunk), collective());
}

void FullyShardedModel::Impl::ensureGathered(Unit& unit) {
  if (unit.gathered) return;
  startGather(unit);
  waitFor(unit.gather);
  record(*unit.gather, "allgather", static_cast<std::size_t>(unit.full.nbytes()));
  unit.gather.reset();
  unit.gathered = true;
}

void FullyShardedModel::Impl::waitFor(const std::shared_ptr<Work>& work) {
  if (work->isCompleted()) {
    work->wait();  // rethrows its failure
    return;
  }
  const auto begin = Clock::now();
  work->wait();
  const auto end = Clock::now();
  step_.wait += secondsIn(end - begin);
  if (options_.timeline) options_.timeline->span(Timeline::Track::kCompute, "wait", begin, end);
}

void FullyShardedModel::Impl::record(const Work& work, const char* what, std::size_t bytes) {
  step_.communicate += secondsIn(work.finishedAt() - work.startedAt());
  step_.bytes += bytes;
  ++step_.buckets;
  if (options_.timeline)
    options_.timeline->span(Timeline::Track::kCommunication, what, work.startedAt(), work.finishedAt(),
                            "\"bytes\":" + std::to_string(bytes));
}

::torch::Tensor FullyShardedModel::Impl::forward(const ::torch::Tensor& input) {
  const bool training = ::torch::GradMode::is_enabled();
  ::torch::Tensor x = input;
  std::size_t c = 0;
  for (auto& child : *model_) {
    const std::size_t u = unitOf_[c++];
    if (u == 0) {
      x = child.forward(x);
      continue;
    }
    {
      MutexLock lock(mu_);
      ensureGathered(units_[u - 1]);
      if (options_.prefetch && u < units_.size()) startGather(units_[u]);
    }
    x = child.forward(x);
    MutexLock lock(mu_);
    if (training && x.requires_grad()) {
      x.register_hook(BackwardHook{this, u - 1});
      if (u == units_.size()) continue;  // backward starts with it
    }
    release(units_[u - 1]);
  }
  return x;
}

void FullyShardedModel::Impl::beforeBackward(std::size_t u) {
  MutexLock lock(mu_);
  // The units after u are done: their backward ran before this hook could.
  for (std::size_t later = u + 1; later < units_.size(); ++later) release(units_[later]);
  ensureGathered(units_[u]);
  if (options_.prefetch && u > 0) startGather(units_[u - 1]);
  // Reduce-scatters that finished: their buffers go now rather than at synchronize().
  for (Unit& unit : units_)
    if (unit.scatter && unit.scatter->isCompleted()) finishScatter(unit);
}

void FullyShardedModel::Impl::onGradient(std::size_t u, std::size_t p) {
  MutexLock lock(mu_);
  Unit& unit = units_[u];
  ::torch::Tensor& param = unit.params[p];
  ::torch::Tensor grad = param.mutable_grad();
  if (!grad.defined() || unit.arrived[p] || unit.scatter) return;
  ::torch::NoGradGuard noGrad;
  if (!unit.gradFull.defined()) {
    unit.gradFull = ::torch::empty({unit.full.numel()});
    unit.gradFull.narrow(0, unit.used, unit.gradFull.numel() - unit.used).zero_();  // the padding
  }
  unit.gradFull.narrow(0, unit.offsets[p], param.numel()).view(param.sizes()).copy_(grad);
  param.mutable_grad().reset();  // its memory goes: the unit's buffer holds it
  unit.arrived[p] = true;
  if (++unit.arrivals == unit.params.size()) issueScatters();
}

void FullyShardedModel::Impl::issueScatters() {
  // Strictly from the last unit to the first, so that every rank issues them in one order.
  while (nextScatter_ > 0 && units_[nextScatter_ - 1].arrivals == units_[nextScatter_ - 1].params.size())
    issueScatter(units_[--nextScatter_]);
}

void FullyShardedModel::Impl::issueScatter(Unit& unit) {
  if (options_.scattersInFlight > 0) {
    // The oldest in flight is the one of the highest unit (they go from the last to the first).
    std::size_t inFlight = 0;
    for (const Unit& u : units_) inFlight += u.scatter ? 1 : 0;
    for (std::size_t u = units_.size(); u-- > 0 && inFlight >= static_cast<std::size_t>(options_.scattersInFlight);)
      if (units_[u].scatter) {
        finishScatter(units_[u]);
        --inFlight;
      }
  }
  ::torch::NoGradGuard noGrad;
  if (!unit.gradFull.defined()) unit.gradFull = ::torch::zeros({unit.full.numel()});
  for (std::size_t p = 0; p < unit.params.size(); ++p)  // no gradient: reduced as zeros
    if (!unit.arrived[p]) unit.gradFull.narrow(0, unit.offsets[p], unit.params[p].numel()).zero_();
  unit.reduced = ::torch::empty({unit.chunk});
  CollectiveOptions o = collective();
  o.op = ReduceOp::kAverage;
  unit.scatter = scatter_->reduceScatterAsync(unit.gradFull.data_ptr<float>(), unit.reduced.data_ptr<float>(),
                                              static_cast<std::size_t>(unit.chunk), o);
}

void FullyShardedModel::Impl::finishScatter(Unit& unit) {
  waitFor(unit.scatter);
  record(*unit.scatter, "reduce-scatter", static_cast<std::size_t>(unit.gradFull.nbytes()));
  unit.scatter.reset();
  unit.gradFull = ::torch::Tensor();
  ::torch::NoGradGuard noGrad;
  ::torch::Tensor& grad = unit.shard.mutable_grad();
  if (grad.defined()) {
    grad.add_(unit.reduced);
  } else {
    grad = unit.reduced;
  }
  unit.reduced = ::torch::Tensor();
}

void FullyShardedModel::Impl::synchronize() {
  MutexLock lock(mu_);
  const auto begin = Clock::now();
  std::exception_ptr failure;
  for (Unit& unit : units_) unit.arrivals = unit.params.size();  // what never came is reduced as zeros
  try {
    issueScatters();
    for (std::size_t u = units_.size(); u-- > 0;)
      if (units_[u].scatter) finishScatter(units_[u]);
  } catch (...) {
    failure = std::current_exception();
  }
  for (Unit& unit : units_) {
    try {
      release(unit);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    unit.scatter.reset();
    unit.gradFull = ::torch::Tensor();
    unit.arrived.assign(unit.params.size(), false);
    unit.arrivals = 0;
    for (auto& param : unit.params) param.mutable_grad().reset();
  }
  nextScatter_ = units_.size();
  if (failure) std::rethrow_exception(failure);
  const auto end = Clock::now();
  if (options_.timeline) options_.timeline->span(Timeline::Track::kCompute, "synchronize", begin, end);
  step_.steps = 1;
  step_.step = secondsIn(end - stepBegin_);
  step_.compute = step_.step - step_.wait;
  stepBegin_ = end;
  last_ = step_;
  totals_ += step_;
  step_ = StepTiming{};
}

void FullyShardedModel::Impl::gatherAll() {
  MutexLock lock(mu_);
  for (Unit& unit : units_) startGather(unit);
  for (Unit& unit : units_) ensureGathered(unit);
}

void FullyShardedModel::Impl::gatherOnto(int root) {
  MutexLock lock(mu_);
  const bool here = comm_->rank() == root;
  CollectiveOptions o = collective();
  o.root = root;
  for (Unit& unit : units_) {
    if (unit.gathered) continue;
    if (unit.gather) {
      ensureGathered(unit);
      continue;
    }
    if (here) allocate(unit);
    comm_->gather(unit.shard.data_ptr<float>(), here ? unit.full.data_ptr<float>() : nullptr,
                  static_cast<std::size_t>(unit.chunk), o);
    unit.gathered = here;
    // The root's shard is in full now: it becomes a view of it, and its own memory goes.
    if (here) unit.shard.set_data(unit.full.narrow(0, comm_->rank() * unit.chunk, unit.chunk));
  }
}

std::size_t FullyShardedModel::Impl::stateBytes() const {
  MutexLock lock(mu_);
  std::size_t bytes = 0;
  auto add = [&](const ::torch::Tensor& t) {
    if (t.defined()) bytes += static_cast<std::size_t>(t.storage().nbytes());
  };
  for (const Unit& unit : units_) {
    add(unit.shard);
    add(unit.shard.grad());
    add(unit.full);
    add(unit.gradFull);
    add(unit.reduced);
  }
  return bytes;
}

FullyShardedModel::FullyShardedModel(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model,
                                     FullyShardedOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(model), std::vector<::torch::Tensor>{},
                                   std::move(options))) {}

FullyShardedModel::FullyShardedModel(std::shared_ptr<Communicator> comm, ::torch::nn::Sequential model,
                                     std::vector<::torch::Tensor> shards, FullyShardedOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(model), std::move(shards), std::move(options))) {}

::torch::Tensor takeShard(::torch::nn::Module& unit, int rank, int world) {
  GYRE_ARG_CHECK(world >= 1 && rank >= 0 && rank < world, "takeShard: rank ", rank, " of ", world);
  const std::vector<::torch::Tensor> params = shardedParameters(unit);
  if (params.empty()) return {};
  std::int64_t used = 0;
  for (const ::torch::Tensor& p : params) used += p.numel();
  const std::int64_t chunk = chunkOf(used, world);
  const std::int64_t begin = rank * chunk, end = std::min(begin + chunk, used);
  ::torch::Tensor shard = ::torch::zeros({chunk});
  ::torch::NoGradGuard noGrad;
  std::int64_t offset = 0;
  for (const ::torch::Tensor& p : params) {
    GYRE_USAGE_CHECK(p.scalar_type() == ::torch::kFloat32, "FullyShardedModel shards float32 parameters; one is ",
                     c10::toString(p.scalar_type()));
    const std::int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
    if (from < to) shard.narrow(0, from - begin, to - from).copy_(p.reshape({-1}).narrow(0, from - offset, to - from));
    offset += p.numel();
    detail::dropStorage(p);
  }
  return shard;
}

FullyShardedModel::~FullyShardedModel() = default;

::torch::Tensor FullyShardedModel::forward(const ::torch::Tensor& input) { return impl_->forward(input); }

std::vector<::torch::Tensor> FullyShardedModel::parameters() const {
  MutexLock lock(impl_->mu_);
  std::vector<::torch::Tensor> shards;
  for (const auto& unit : impl_->units_) shards.push_back(unit.shard);
  return shards;
}

FlatLayout FullyShardedModel::shardLayout(const std::vector<::torch::Tensor>& params) const {
  const std::unordered_map<const void*, std::size_t> index = parameterIndex(params);
  const std::int64_t rank = impl_->comm_->rank();
  MutexLock lock(impl_->mu_);
  FlatLayout layout;
  for (const auto& unit : impl_->units_) {
    std::vector<std::int64_t> numels;
    std::vector<std::size_t> indices;
    for (const ::torch::Tensor& p : unit.params) {
      const auto it = index.find(p.unsafeGetTensorImpl());
      GYRE_ARG_CHECK(it != index.end(), "shardLayout: a sharded parameter is not among the parameters given");
      numels.push_back(p.numel());
      indices.push_back(it->second);
    }
    layout.push_back(piecesOfRange(numels, unit.offsets, indices, rank * unit.chunk, (rank + 1) * unit.chunk));
  }
  return layout;
}

void FullyShardedModel::zeroGrad() {
  MutexLock lock(impl_->mu_);
  for (auto& unit : impl_->units_) unit.shard.mutable_grad().reset();
}

void FullyShardedModel::synchronize() { impl_->synchronize(); }
void FullyShardedModel::gatherParameters() { impl_->gatherAll(); }
void FullyShardedModel::gatherParametersOnto(int root) { impl_->gatherOnto(root); }
std::size_t FullyShardedModel::stateBytes() const { return impl_->stateBytes(); }

std::size_t FullyShardedModel::fullParameterBytes() const {
  MutexLock lock(impl_->mu_);
  std::size_t bytes = 0;
  for (const auto& unit : impl_->units_) bytes += static_cast<std::size_t>(unit.used) * sizeof(float);
  return bytes;
}

const StepTiming& FullyShardedModel::lastStep() const { return impl_->last_; }
const StepTiming& FullyShardedModel::totals() const { return impl_->totals_; }

void FullyShardedModel::resetTiming() {
  MutexLock lock(impl_->mu_);
  impl_->totals_ = StepTiming{};
  impl_->step_ = StepTiming{};
  impl_->stepBegin_ = Clock::now();
}

::torch::nn::Sequential& FullyShardedModel::module() { return impl_->model_; }

}  // namespace gyre::torch
