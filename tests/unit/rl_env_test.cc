// The classic-control environments: trajectories from fixed states and actions match the
// published equations (the reference figures come from a separate float64 transcription of them),
// CartPole's energy changes exactly by the work of the push, Acrobot's is kept by its Runge-Kutta
// step without torque, the episode rules (termination, truncation at 500 steps) hold, and bad
// input is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rl/env.h"

namespace gyre::rl {
namespace {

constexpr double kPi = std::numbers::pi;

void expectState(const std::vector<double>& got, const std::vector<double>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "state " << i;
}

TEST(RlEnv, CartPoleFollowsThePublishedEquations) {
  auto env = makeEnv("cartpole");
  env->setState({0.01, -0.02, 0.03, 0.04});
  for (int a : {1, 0, 0, 1, 1, 1, 0, 1, 0, 0}) {
    const Step s = env->step(a);
    EXPECT_EQ(s.reward, 1.0);
    EXPECT_FALSE(s.terminated);
  }
  expectState(env->state(), {0.03293383706570074, -0.02379962460232901, 0.0054623041616948635, 0.12379799946559022},
              1e-12);
  // Pushed right from rest the pole falls back past 12° on the ninth step, which still pays.
  env->setState({0, 0, 0, 0});
  Step s;
  int steps = 0;
  do {
    s = env->step(1);
    ++steps;
  } while (!s.terminated && steps < 100);
  EXPECT_EQ(steps, 9);
  EXPECT_EQ(s.reward, 1.0);
  EXPECT_NEAR(s.observation[2], -0.21518604988500967, 1e-6);
  EXPECT_THROW(env->step(1), InvalidArgument);  // after the episode ended
}

// The pole is a rod on a cart: E = ½Mẋ² + m l ẋ θ̇ cos θ + ⅔ m l² θ̇² + m g l cos θ, and the push F
// does work F ẋ, so dE/dt = F ẋ with the accelerations of the step (ẋ' = ẋ + τẍ, θ̇' = θ̇ + τθ̈).
TEST(RlEnv, CartPoleAccelerationsConserveEnergyButThePush) {
  constexpr double massPole = 0.1, total = 1.1, l = 0.5, g = 9.8, tau = 0.02;
  auto env = makeEnv("cartpole");
  for (const std::vector<double>& start :
       std::vector<std::vector<double>>{{0, 0.3, 0.1, -0.5}, {1.0, -1.2, -0.15, 0.8}, {-0.5, 2.0, 0.05, 1.5}}) {
    for (int action : {0, 1}) {
      env->setState(start);
      env->step(action);
      const std::vector<double> next = env->state();
      const double xDot = start[1], theta = start[2], thetaDot = start[3];
      const double xAcc = (next[1] - xDot) / tau, thetaAcc = (next[3] - thetaDot) / tau;
      const double dEdt = (total * xDot + massPole * l * thetaDot * std::cos(theta)) * xAcc +
                          (-massPole * l * xDot * thetaDot * std::sin(theta) - massPole * g * l * std::sin(theta)) * thetaDot +
                          (massPole * l * xDot * std::cos(theta) + 4.0 / 3.0 * massPole * l * l * thetaDot) * thetaAcc;
      const double force = action == 1 ? 10.0 : -10.0;
      EXPECT_NEAR(dEdt, force * xDot, 1e-9) << "action " << action;
    }
  }
}

TEST(RlEnv, AcrobotFollowsTheBooksEquations) {
  auto env = makeEnv("acrobot");
  EXPECT_EQ(env->observationSize(), 6);
  EXPECT_EQ(env->actions(), 3);
  env->setState({0.05, -0.03, 0.02, 0.01});
  for (int a : {2, 2, 0, 0, 1, 2, 0, 2, 2, 1}) {
    const Step s = env->step(a);
    EXPECT_EQ(s.reward, -1.0);
    EXPECT_FALSE(s.terminated);
  }
  expectState(env->state(), {-0.03964227020138736, 0.005099732588537256, -0.27750308744792335, 0.6153990742485903},
              1e-12);
}

// Without torque the two links keep their energy: T = ½(m1 lc1² + I1) θ̇1² + ½ m2 |v2|² +
// ½ I2 (θ̇1 + θ̇2)², V = m1 g y1 + m2 g y2, with the heights of the centres of mass measured up.
// The equations keep it exactly (dE/dt = 0); ten Runge-Kutta steps of 0.2 s lose 1.2e-3 of it.
TEST(RlEnv, AcrobotKeepsItsEnergyWithoutTorque) {
  constexpr double m = 1, l1 = 1, lc = 0.5, inertia = 1, g = 9.8;
  auto energy = [&](const std::vector<double>& s) {
    const double t1 = s[0], t2 = s[1], w1 = s[2], w2 = s[3];
    const double vx2 = l1 * std::cos(t1) * w1 + lc * std::cos(t1 + t2) * (w1 + w2);
    const double vy2 = l1 * std::sin(t1) * w1 + lc * std::sin(t1 + t2) * (w1 + w2);
    const double kinetic = 0.5 * (m * lc * lc + inertia) * w1 * w1 + 0.5 * m * (vx2 * vx2 + vy2 * vy2) +
                           0.5 * inertia * (w1 + w2) * (w1 + w2);
    const double potential = -m * g * lc * std::cos(t1) - m * g * (l1 * std::cos(t1) + lc * std::cos(t1 + t2));
    return kinetic + potential;
  };
  auto env = makeEnv("acrobot");
  env->setState({1.0, -0.5, 0.3, -0.2});
  const double before = energy(env->state());
  for (int i = 0; i < 10; ++i) env->step(1);
  EXPECT_NEAR(energy(env->state()), before, 2e-3 * std::abs(before));
  // A torque does work: the energy moves.
  env->setState({1.0, -0.5, 0.3, -0.2});
  for (int i = 0; i < 10; ++i) env->step(2);
  EXPECT_GT(std::abs(energy(env->state()) - before), 0.1);
}

TEST(RlEnv, EpisodesTruncateAtTheirLimitAndStartFromTheSeed) {
  auto env = makeEnv("acrobot");
  env->setState({0, 0, 0, 0});  // hanging still: no torque keeps it there
  Step s;
  for (int i = 0; i < 500; ++i) s = env->step(1);
  EXPECT_TRUE(s.truncated);
  EXPECT_FALSE(s.terminated);
  EXPECT_THROW(env->step(1), InvalidArgument);

  auto cart = makeEnv("cartpole");
  const std::vector<float> a = cart->reset(7), b = cart->reset(7), c = cart->reset(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) EXPECT_LE(std::abs(v), 0.05f);
}

TEST(RlEnv, BadInputIsRefused) {
  EXPECT_THROW(makeEnv("pendulum"), InvalidArgument);
  auto env = makeEnv("cartpole");
  EXPECT_THROW(env->step(0), InvalidArgument);  // before reset
  env->reset(1);
  EXPECT_THROW(env->step(2), InvalidArgument);
  EXPECT_THROW(env->step(-1), InvalidArgument);
  EXPECT_THROW(env->setState({1, 2, 3}), InvalidArgument);
  const std::vector<float> obs = makeEnv("acrobot")->reset(1);
  ASSERT_EQ(obs.size(), 6u);
  EXPECT_NEAR(obs[0] * obs[0] + obs[1] * obs[1], 1.0, 1e-6);  // cos, sin of θ1
  for (double v : makeEnv("acrobot")->state()) EXPECT_LE(std::abs(v), kPi);
}

}  // namespace
}  // namespace gyre::rl
