#include "ps/optimizer.h"

#include <cmath>

#include "common/check.h"

namespace gyre::ps {
namespace {

void sgd(const OptimizerOptions& c, float lr, std::span<float> p, std::span<const float> g,
         SliceOptimizerState& s) {
  const std::size_t n = p.size();
  if (c.momentum == 0) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + c.weightDecay * p[i]);
    return;
  }
  const bool first = s.momentum.empty();
  if (first) s.momentum.resize(n);
  float* buf = s.momentum.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float d = g[i] + c.weightDecay * p[i];
    buf[i] = first ? d : c.momentum * buf[i] + d;
    p[i] -= lr * buf[i];
  }
}

void adam(const OptimizerOptions& c, float lr, std::span<float> p, std::span<const float> g,
          SliceOptimizerState& s) {
  const std::size_t n = p.size();
  if (s.expAvg.empty()) s.expAvg.assign(n, 0.0f), s.expAvgSq.assign(n, 0.0f);
  const double step = static_cast<double>(s.steps);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta1), step));
  const float bias2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(c.beta2), step)));
  const float stepSize = lr / bias1;
  float* m = s.expAvg.data();
  float* v = s.expAvgSq.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float d = g[i] + c.weightDecay * p[i];
    m[i] += (d - m[i]) * (1.0f - c.beta1);
    v[i] = v[i] * c.beta2 + (1.0f - c.beta2) * d * d;
    const float denom = std::sqrt(v[i]) / bias2Sqrt + c.eps;
    p[i] -= stepSize * m[i] / denom;
  }
}

}  // namespace

void applyUpdate(const OptimizerOptions& config, float lr, std::span<float> params,
                 std::span<const float> grad, SliceOptimizerState& state) {
  GYRE_ENFORCE_EQ(params.size(), grad.size(), "gradient and parameters of a slice differ in length");
  ++state.steps;
  if (config.kind == OptimizerOptions::Kind::kAdam)
    adam(config, lr, params, grad, state);
  else
    sgd(config, lr, params, grad, state);
}

}  // namespace gyre::ps
