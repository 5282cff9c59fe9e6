// LARS and LAMB (gyre/torch/optimizers.h): against their formulas written out step by step, the
// properties the trust ratio exists for, and a save/load round trip.
#include "gyre/torch/optimizers.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gyre/errors.h"
#include "torch/optimizer_bytes.h"

namespace gyre {
namespace {

using torch::Lamb;
using torch::LambOptions;
using torch::Lars;
using torch::LarsOptions;

// A layer: a 3x4 weight (adapted) and a bias of 3 (a vector: not adapted), in float64.
std::vector<::torch::Tensor> layer() {
  auto w = ::torch::linspace(-1.0, 2.0, 12, ::torch::kFloat64).reshape({3, 4}).requires_grad_();
  auto b = ::torch::tensor({0.5, -0.25, 1.0}, ::torch::kFloat64).requires_grad_();
  return {w, b};
}

// Step k's gradient of tensor i: fixed, different every step, neither small nor aligned with it.
::torch::Tensor gradient(const ::torch::Tensor& p, int step, int i) {
  const auto n = p.numel();
  auto g = ::torch::arange(n, ::torch::kFloat64).mul(0.37 * (step + 1)).add(0.1 * (i + 1)).sin();
  return g.reshape(p.sizes()) * (step + 2);
}

void setGradients(std::vector<::torch::Tensor>& params, int step, double scale = 1.0) {
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i].mutable_grad() = gradient(params[i], step, i) * scale;
}

std::vector<::torch::Tensor> detached(const std::vector<::torch::Tensor>& params) {
  std::vector<::torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

void expectNear(const ::torch::Tensor& got, const ::torch::Tensor& want, double tol, const char* what) {
  EXPECT_LE((got - want).abs().max().item<double>(), tol) << what;
}

TEST(Lars, MatchesItsFormulaOverThreeSteps) {
  constexpr double kLr = 0.5, kMomentum = 0.9, kDecay = 0.01, kEta = 0.02, kEps = 1e-9;
  auto params = layer();
  auto want = detached(params);
  std::vector<::torch::Tensor> buffers(2);
  Lars lars(params, LarsOptions(kLr).momentum(kMomentum).weight_decay(kDecay).eta(kEta).eps(kEps));
  for (int step = 0; step < 3; ++step) {
    setGradients(params, step);
    lars.step();
    for (int i = 0; i < 2; ++i) {
      const auto g = gradient(want[i], step, i);
      ::torch::Tensor d;
      if (i == 0) {  // the weight: decay and the trust ratio
        const double wn = want[i].norm().item<double>(), gn = g.norm().item<double>();
        d = (g + kDecay * want[i]) * (kEta * wn / (gn + kDecay * wn + kEps));
      } else {  // the bias: plain momentum SGD
        d = g;
      }
      buffers[i] = step == 0 ? d : buffers[i] * kMomentum + d;
      want[i] = want[i] - kLr * buffers[i];
    }
    expectNear(params[0], want[0], 1e-12, "weight");
    expectNear(params[1], want[1], 1e-12, "bias");
  }
}

// The point of LARS: a layer's step no longer grows with its gradient (a larger batch's larger
// learning rate), it is eta·lr·‖w‖ whatever the gradient's scale.
TEST(Lars, AWeightsStepDoesNotDependOnTheGradientsScale) {
  auto small = layer(), large = layer();
  Lars a(small, LarsOptions(1.0).momentum(0).eps(0));
  Lars b(large, LarsOptions(1.0).momentum(0).eps(0));
  const double before = small[0].norm().item<double>();
  setGradients(small, 0);
  setGradients(large, 0, 1000.0);
  a.step();
  b.step();
  expectNear(small[0], large[0], 1e-12, "weight");
  EXPECT_NEAR((small[0] - layer()[0]).norm().item<double>(), 0.001 * before, 1e-12);
  EXPECT_GT((small[1] - large[1]).abs().max().item<double>(), 1.0) << "a bias is not adapted";
}

TEST(Lamb, MatchesItsFormulaOverThreeSteps) {
  constexpr double kLr = 0.01, kBeta1 = 0.8, kBeta2 = 0.95, kEps = 1e-6, kDecay = 0.1;
  auto params = layer();
  auto want = detached(params);
  std::vector<::torch::Tensor> m(2), v(2);
  for (int i = 0; i < 2; ++i) m[i] = ::torch::zeros_like(want[i]), v[i] = ::torch::zeros_like(want[i]);
  Lamb lamb(params, LambOptions(kLr).betas({kBeta1, kBeta2}).eps(kEps).weight_decay(kDecay));
  for (int step = 0; step < 3; ++step) {
    setGradients(params, step);
    lamb.step();
    for (int i = 0; i < 2; ++i) {
      const auto g = gradient(want[i], step, i);
      m[i] = kBeta1 * m[i] + (1 - kBeta1) * g;
      v[i] = kBeta2 * v[i] + (1 - kBeta2) * g * g;
      const auto mHat = m[i] / (1 - std::pow(kBeta1, step + 1));
      const auto vHat = v[i] / (1 - std::pow(kBeta2, step + 1));
      auto r = mHat / (vHat.sqrt() + kEps);
      double trust = 1.0;
      if (i == 0) {
        r = r + kDecay * want[i];
        trust = want[i].norm().item<double>() / r.norm().item<double>();
      }
      want[i] = want[i] - kLr * trust * r;
    }
    expectNear(params[0], want[0], 1e-12, "weight");
    expectNear(params[1], want[1], 1e-12, "bias");
  }
}

// The point of LAMB: every adapted tensor moves by exactly lr·‖w‖ per step.
TEST(Lamb, EachStepMovesAWeightByTheLearningRateTimesItsNorm) {
  constexpr double kLr = 0.03;
  auto params = layer();
  Lamb lamb(params, LambOptions(kLr).weight_decay(0.05));
  for (int step = 0; step < 4; ++step) {
    const auto before = params[0].detach().clone();
    setGradients(params, step, step == 2 ? 1e-4 : 1.0);
    lamb.step();
    EXPECT_NEAR((params[0] - before).norm().item<double>(), kLr * before.norm().item<double>(), 1e-12)
        << step;
  }
}

// A checkpoint's state and options (optimizer_bytes.h) continue the run exactly.
// `other` differs in every option: the loaded bytes must bring each one back.
template <typename Opt, typename Options>
void expectSaveLoadContinues(Options options, Options other) {
  auto params = layer();
  Opt first(params, options);
  for (int step = 0; step < 2; ++step) {
    setGradients(params, step);
    first.step();
  }
  const std::string bytes = gyre::torch::optimizerStateBytes(first);
  auto copies = detached(params);
  for (auto& c : copies) c.requires_grad_();
  Opt second(copies, other);
  gyre::torch::loadOptimizerStateBytes(second, bytes, "the test's bytes");
  setGradients(params, 2);
  setGradients(copies, 2);
  first.step();
  second.step();
  expectNear(copies[0], params[0], 0, "weight");
  expectNear(copies[1], params[1], 0, "bias");
}

TEST(Lars, SavedStateAndOptionsContinueTheRunExactly) {
  expectSaveLoadContinues<Lars>(
      LarsOptions(0.5).momentum(0.9).weight_decay(0.01).eta(0.02).eps(1e-9),
      LarsOptions(123.0).momentum(0.1).weight_decay(0.7).eta(0.3).eps(0.5).adapt_vectors(true));
}

TEST(Lamb, SavedStateAndOptionsContinueTheRunExactly) {
  expectSaveLoadContinues<Lamb>(
      LambOptions(0.01).betas({0.8, 0.95}).weight_decay(0.1).eps(1e-6),
      LambOptions(123.0).betas({0.1, 0.2}).weight_decay(0.7).eps(0.5).adapt_vectors(true));
}

TEST(Lars, WorksAsATorchOptimizerWithZeroGradsAndMissingOnes) {
  auto params = layer();
  Lars lars(params, LarsOptions(0.1));
  params[0].mutable_grad() = ::torch::zeros_like(params[0]);  // trust 1, a zero step
  const auto before = detached(params);
  lars.step();  // the bias has no gradient: left alone
  expectNear(params[0], before[0], 0, "weight");
  expectNear(params[1], before[1], 0, "bias");
  lars.zero_grad();
}

TEST(Optimizers, RejectBadOptionsNamingThem) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto params = layer();
  auto expectThrowNaming = [](auto make, const char* name) {
    try {
      make();
      ADD_FAILURE() << "no error for " << name;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  expectThrowNaming([&] { Lars(params, LarsOptions(-1)); }, "lr");
  expectThrowNaming([&] { Lars(params, LarsOptions(0.1).momentum(1.0)); }, "momentum");
  expectThrowNaming([&] { Lars(params, LarsOptions(0.1).eta(nan)); }, "eta");
  expectThrowNaming([&] { Lamb(params, LambOptions(0.1).betas({0.9, 1.0})); }, "beta2");
  expectThrowNaming([&] { Lamb(params, LambOptions(0.1).weight_decay(-0.1)); }, "weight_decay");
}

}  // namespace
}  // namespace gyre

namespace gyre {
namespace {

// The optimizer's state counted in place: one tensor per parameter for momentum, two for Adam's
// and Lamb's moments; none before the first step.
TEST(OptimizerStateTensorBytes, CountsEachKindsStateTensors) {
  auto params = [] {
    return std::vector<::torch::Tensor>{::torch::ones({3, 4}).requires_grad_(), ::torch::ones({5}).requires_grad_()};
  };
  constexpr std::size_t kParamBytes = (12 + 5) * sizeof(float);
  auto stepOnce = [](::torch::optim::Optimizer& o, std::vector<::torch::Tensor>& p) {
    for (auto& t : p) t.mutable_grad() = ::torch::ones_like(t);
    o.step();
  };
  auto p1 = params();
  ::torch::optim::SGD sgd(p1, ::torch::optim::SGDOptions(0.1).momentum(0.9));
  EXPECT_EQ(torch::optimizerStateTensorBytes(sgd), 0u);
  stepOnce(sgd, p1);
  EXPECT_EQ(torch::optimizerStateTensorBytes(sgd), kParamBytes);
  auto p2 = params();
  ::torch::optim::Adam adam(p2, ::torch::optim::AdamOptions(0.1));
  stepOnce(adam, p2);
  EXPECT_EQ(torch::optimizerStateTensorBytes(adam), 2 * kParamBytes);
  auto p3 = params();
  Lamb lamb(p3, LambOptions(0.1));
  stepOnce(lamb, p3);
  EXPECT_EQ(torch::optimizerStateTensorBytes(lamb), 2 * kParamBytes);
}

}  // namespace
}  // namespace gyre
