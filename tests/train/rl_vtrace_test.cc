// V-trace against a separate transcription of the paper's definition (section 4.1): the explicit
// sum v_s = V(x_s) + Σ_t (Π γ) (Π c) ρ_t δ_t in double precision, on random off-policy
// trajectories with episode ends; on-policy with ρ̄ = c̄ = 1 it is the n-step return bootstrapped
// from the last value, and with ρ̄ = c̄ = 0 it is V itself.
#include <gtest/gtest.h>

#include <vector>

#include "rl/learn/vtrace.h"

namespace gyre::rl {
namespace {

using Matrix = std::vector<std::vector<double>>;

Matrix toMatrix(const ::torch::Tensor& t) {
  Matrix m(static_cast<std::size_t>(t.size(0)), std::vector<double>(static_cast<std::size_t>(t.size(1))));
  for (long i = 0; i < t.size(0); ++i)
    for (long j = 0; j < t.size(1); ++j) m[i][j] = t[i][j].item<double>();
  return m;
}

// The definition, term by term.
Matrix explicitVs(const Matrix& r, const Matrix& g, const Matrix& v, const Matrix& logRatio, double rhoBar,
                  double cBar) {
  Matrix vs = r;
  for (std::size_t b = 0; b < r.size(); ++b) {
    const std::size_t n = r[b].size();
    for (std::size_t s = 0; s < n; ++s) {
      double sum = 0, discount = 1, traces = 1;
      for (std::size_t t = s; t < n; ++t) {
        const double ratio = std::exp(logRatio[b][t]);
        const double delta = std::min(rhoBar, ratio) * (r[b][t] + g[b][t] * v[b][t + 1] - v[b][t]);
        sum += discount * traces * delta;
        discount *= g[b][t];
        traces *= std::min(cBar, ratio);
      }
      vs[b][s] = v[b][s] + sum;
    }
  }
  return vs;
}

struct Batch {
  ::torch::Tensor rewards, discounts, values, logRatios;
};

Batch randomBatch(long b, long t, double gamma) {
  ::torch::manual_seed(3);
  Batch x;
  x.rewards = ::torch::randn({b, t}, ::torch::kFloat64);
  x.discounts = gamma * (::torch::rand({b, t}, ::torch::kFloat64) > 0.2).to(::torch::kFloat64);  // ~20% ends
  x.values = ::torch::randn({b, t + 1}, ::torch::kFloat64);
  x.logRatios = 0.5 * ::torch::randn({b, t}, ::torch::kFloat64);
  return x;
}

TEST(VTrace, MatchesThePapersDefinitionOffPolicy) {
  for (const auto& [rhoBar, cBar] : std::vector<std::pair<double, double>>{{1, 1}, {2, 0.5}, {0.7, 1.3}}) {
    const Batch x = randomBatch(4, 12, 0.9);
    const VTrace got = vtrace(x.rewards, x.discounts, x.values, x.logRatios, rhoBar, cBar);
    const Matrix want = explicitVs(toMatrix(x.rewards), toMatrix(x.discounts), toMatrix(x.values),
                                   toMatrix(x.logRatios), rhoBar, cBar);
    const Matrix vs = toMatrix(got.vs), adv = toMatrix(got.advantages);
    const Matrix r = toMatrix(x.rewards), g = toMatrix(x.discounts), v = toMatrix(x.values),
                 lr = toMatrix(x.logRatios);
    for (std::size_t b = 0; b < 4; ++b)
      for (std::size_t s = 0; s < 12; ++s) {
        EXPECT_NEAR(vs[b][s], want[b][s], 1e-12) << b << " " << s;
        const double next = s + 1 < 12 ? want[b][s + 1] : v[b][12];
        EXPECT_NEAR(adv[b][s], std::min(rhoBar, std::exp(lr[b][s])) * (r[b][s] + g[b][s] * next - v[b][s]),
                    1e-12);
      }
  }
}

TEST(VTrace, OnPolicyItIsTheBootstrappedReturnAndWithoutTracesTheValue) {
  const Batch x = randomBatch(2, 6, 0.95);
  const ::torch::Tensor zero = ::torch::zeros_like(x.logRatios);
  const Matrix vs = toMatrix(vtrace(x.rewards, x.discounts, x.values, zero, 1, 1).vs);
  const Matrix r = toMatrix(x.rewards), g = toMatrix(x.discounts), v = toMatrix(x.values);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t s = 0; s < 6; ++s) {
      double ret = 0, discount = 1;
      for (std::size_t t = s; t < 6; ++t) {
        ret += discount * r[b][t];
        discount *= g[b][t];
      }
      EXPECT_NEAR(vs[b][s], ret + discount * v[b][6], 1e-12) << b << " " << s;
    }
  // ρ̄ = c̄ → 0: nothing corrects V.
  const Matrix none = toMatrix(vtrace(x.rewards, x.discounts, x.values, x.logRatios, 1e-300, 1e-300).vs);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t s = 0; s < 6; ++s) EXPECT_NEAR(none[b][s], v[b][s], 1e-12);
}

}  // namespace
}  // namespace gyre::rl
