// LARS and LAMB (include/gyre/torch/optimizers.h). One step walks the tensors of every group:
// the trust ratio takes two norms per adapted tensor (a host sync each on CPU, which is where
// these run), then the update is one or two fused tensor ops.
#include "gyre/torch/optimizers.h"

#include <cmath>
#include <string>

#include "gyre/errors.h"

namespace gyre::torch {
namespace optim = ::torch::optim;
namespace {

std::string keyOf(const ::torch::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

void checkOption(const char* optimizer, const char* name, double value, bool belowOne = false) {
  if (!std::isfinite(value) || value < 0 || (belowOne && value >= 1))
    throw InvalidArgument(std::string(optimizer) + ": " + name + " must be " +
                          (belowOne ? "in [0, 1)" : "finite and not negative") + ", got " +
                          std::to_string(value));
}

// Options and states travel as named values in the archive, as libtorch's own do.
template <typename T>
void write(::torch::serialize::OutputArchive& archive, const char* name, const T& value) {
  archive.write(name, c10::IValue(value));
}
void writeTensor(::torch::serialize::OutputArchive& archive, const char* name, const ::torch::Tensor& t) {
  if (t.defined()) archive.write(name, c10::IValue(t));
}
template <typename T>
void read(::torch::serialize::InputArchive& archive, const char* name, T& into) {
  c10::IValue value;
  if (archive.try_read(name, value)) into = value.to<T>();
}

// The layer-wise trust ratio coefficient·‖w‖ / (‖u‖ + decay·‖w‖ + eps), or 1 when either norm
// is zero.
double trustRatio(const ::torch::Tensor& w, const ::torch::Tensor& u, double coefficient, double decay,
                  double eps) {
  const double wn = w.norm().item<double>();
  const double un = u.norm().item<double>();
  if (!(wn > 0) || !(un > 0)) return 1.0;
  return coefficient * wn / (un + decay * wn + eps);
}

bool adapted(const ::torch::Tensor& p, bool adaptVectors) {
  return adaptVectors || p.dim() > 1;
}

// The closure's loss, evaluated with gradients on as libtorch's optimizers do; none without one.
::torch::Tensor lossOf(const optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enableGrad(true);
  return closure();
}

}  // namespace

// ---- LARS ----

LarsOptions::LarsOptions(double lr) : lr_(lr) {}

void LarsOptions::serialize(::torch::serialize::OutputArchive& archive) const {
  write(archive, "lr", lr());
  write(archive, "momentum", momentum());
  write(archive, "weight_decay", weight_decay());
  write(archive, "eta", eta());
  write(archive, "eps", eps());
  write(archive, "adapt_vectors", adapt_vectors());
}

void LarsOptions::serialize(::torch::serialize::InputArchive& archive) {
  read(archive, "lr", lr_);
  read(archive, "momentum", momentum_);
  read(archive, "weight_decay", weight_decay_);
  read(archive, "eta", eta_);
  read(archive, "eps", eps_);
  read(archive, "adapt_vectors", adapt_vectors_);
}

void LarsParamState::serialize(::torch::serialize::OutputArchive& archive) const {
  writeTensor(archive, "momentum_buffer", momentum_buffer());
}

void LarsParamState::serialize(::torch::serialize::InputArchive& archive) {
  read(archive, "momentum_buffer", momentum_buffer_);
}

Lars::Lars(std::vector<optim::OptimizerParamGroup> groups, LarsOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<LarsOptions>(defaults)) {
  checkOption("LARS", "lr", defaults.lr());
  checkOption("LARS", "momentum", defaults.momentum(), /*belowOne=*/true);
  checkOption("LARS", "weight_decay", defaults.weight_decay());
  checkOption("LARS", "eta", defaults.eta());
  checkOption("LARS", "eps", defaults.eps());
}

Lars::Lars(std::vector<::torch::Tensor> params, LarsOptions defaults)
    : Lars(std::vector<optim::OptimizerParamGroup>{optim::OptimizerParamGroup(std::move(params))}, defaults) {
}

::torch::Tensor larsUpdate(const ::torch::Tensor& p, const ::torch::Tensor& grad, ::torch::Tensor momentumBuffer,
                           const LarsOptions& o) {
  ::torch::NoGradGuard noGrad;
  const bool adapt = adapted(p, o.adapt_vectors());
  const double decay = adapt ? o.weight_decay() : 0.0;
  const double trust = adapt ? trustRatio(p, grad, o.eta(), decay, o.eps()) : 1.0;
  // The local step: trust · (g + wd·w).
  ::torch::Tensor d = decay != 0 ? grad.add(p, decay) : grad.clone();
  if (trust != 1.0) d.mul_(trust);
  if (o.momentum() != 0) {
    if (momentumBuffer.defined())
      momentumBuffer.mul_(o.momentum()).add_(d);
    else
      momentumBuffer = d.clone();
    d = momentumBuffer;
  }
  p.add_(d, -o.lr());
  return momentumBuffer;
}

void lambUpdate(const ::torch::Tensor& p, const ::torch::Tensor& grad, const ::torch::Tensor& expAvg,
                const ::torch::Tensor& expAvgSq, std::int64_t step, const LambOptions& o) {
  ::torch::NoGradGuard noGrad;
  const auto [beta1, beta2] = o.betas();
  expAvg.mul_(beta1).add_(grad, 1 - beta1);
  expAvgSq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  // Adam's direction, bias-corrected, plus decoupled weight decay.
  ::torch::Tensor r = (expAvg / correction1) / ((expAvgSq / correction2).sqrt_().add_(o.eps()));
  const bool adapt = adapted(p, o.adapt_vectors());
  if (adapt && o.weight_decay() != 0) r.add_(p, o.weight_decay());
  const double trust = adapt ? trustRatio(p, r, 1.0, 0.0, 0.0) : 1.0;
  p.add_(r, -o.lr() * trust);
}

::torch::Tensor Lars::step(LossClosure closure) {
  ::torch::NoGradGuard noGrad;
  const ::torch::Tensor loss = lossOf(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const LarsOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (o.momentum() == 0) {
        larsUpdate(p, p.grad(), {}, o);
        continue;
      }
      auto& slot = state_[keyOf(p)];
      if (!slot) slot = std::make_unique<LarsParamState>();
      auto& state = static_cast<LarsParamState&>(*slot);
      state.momentum_buffer(larsUpdate(p, p.grad(), state.momentum_buffer(), o));
    }
  }
  return loss;
}

void Lars::save(::torch::serialize::OutputArchive& archive) const {
  optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}

void Lars::load(::torch::serialize::InputArchive& archive) {
  optim::serialize<LarsParamState, LarsOptions>(archive, *this);
}

// ---- LAMB ----

LambOptions::LambOptions(double lr) : lr_(lr) {}

void LambOptions::serialize(::torch::serialize::OutputArchive& archive) const {
  write(archive, "lr", lr());
  write(archive, "beta1", std::get<0>(betas()));
  write(archive, "beta2", std::get<1>(betas()));
  write(archive, "eps", eps());
  write(archive, "weight_decay", weight_decay());
  write(archive, "adapt_vectors", adapt_vectors());
}

void LambOptions::serialize(::torch::serialize::InputArchive& archive) {
  read(archive, "lr", lr_);
  read(archive, "beta1", std::get<0>(betas_));
  read(archive, "beta2", std::get<1>(betas_));
  read(archive, "eps", eps_);
  read(archive, "weight_decay", weight_decay_);
  read(archive, "adapt_vectors", adapt_vectors_);
}

void LambParamState::serialize(::torch::serialize::OutputArchive& archive) const {
  write(archive, "step", step());
  writeTensor(archive, "exp_avg", exp_avg());
  writeTensor(archive, "exp_avg_sq", exp_avg_sq());
}

void LambParamState::serialize(::torch::serialize::InputArchive& archive) {
  read(archive, "step", step_);
  read(archive, "exp_avg", exp_avg_);
  read(archive, "exp_avg_sq", exp_avg_sq_);
}

Lamb::Lamb(std::vector<optim::OptimizerParamGroup> groups, LambOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<LambOptions>(defaults)) {
  checkOption("LAMB", "lr", defaults.lr());
  checkOption("LAMB", "beta1", std::get<0>(defaults.betas()), /*belowOne=*/true);
  checkOption("LAMB", "beta2", std::get<1>(defaults.betas()), /*belowOne=*/true);
  checkOption("LAMB", "eps", defaults.eps());
  checkOption("LAMB", "weight_decay", defaults.weight_decay());
}

Lamb::Lamb(std::vector<::torch::Tensor> params, LambOptions defaults)
    : Lamb(std::vector<optim::OptimizerParamGroup>{optim::OptimizerParamGroup(std::move(params))}, defaults) {
}

::torch::Tensor Lamb::step(LossClosure closure) {
  ::torch::NoGradGuard noGrad;
  const ::torch::Tensor loss = lossOf(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const LambOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& g = p.grad();
      auto& slot = state_[keyOf(p)];
      if (!slot) {
        auto s = std::make_unique<LambParamState>();
        s->exp_avg(::torch::zeros_like(p));
        s->exp_avg_sq(::torch::zeros_like(p));
        slot = std::move(s);
      }
      auto& s = static_cast<LambParamState&>(*slot);
      s.step(s.step() + 1);
      lambUpdate(p, g, s.exp_avg(), s.exp_avg_sq(), s.step(), o);
    }
  }
  return loss;
}

void Lamb::save(::torch::serialize::OutputArchive& archive) const {
  optim::serialize<LambParamState, LambOptions>(archive, *this);
}

void Lamb::load(::torch::serialize::InputArchive& archive) {
  optim::serialize<LambParamState, LambOptions>(archive, *this);
}

}  // namespace gyre::torch
