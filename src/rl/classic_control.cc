// CartPole and Acrobot from their published equations.
//
// CartPole (Barto, Sutton & Anderson 1983; dynamics as corrected by R. V. Florian, "Correct
// equations for the dynamics of the cart-pole system", 2005, without friction): cart mass 1 kg,
// pole mass 0.1 kg, half-length 0.5 m, force ±10 N, g = 9.8, explicit Euler with τ = 0.02 s:
//   temp = (F + m_p l θ̇² sin θ) / (m_c + m_p)
//   θ̈ = (g sin θ − cos θ · temp) / (l (4/3 − m_p cos² θ / (m_c + m_p)))
//   ẍ = temp − m_p l θ̈ cos θ / (m_c + m_p)
// Reward 1 per step (the last included); the episode terminates when |x| > 2.4 or |θ| > 12°.
//
// Acrobot (Sutton 1996; the book's dynamics, "Reinforcement Learning: An Introduction"): two
// links of 1 m and 1 kg, centres of mass at 0.5 m, moments of inertia 1, g = 9.8, torque −1, 0
// or +1 on the joint between them, one fourth-order Runge-Kutta step over 0.2 s; angles wrapped to
// [−π, π], velocities bounded by 4π and 9π. Reward −1 per step, 0 and termination once the tip
// is above the first joint by more than a link: −cos θ1 − cos(θ1 + θ2) > 1.
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <random>

#include "gyre/errors.h"
#include "gyre/rl/env.h"

namespace gyre::rl {
namespace {

constexpr double kPi = std::numbers::pi;

// What both environments share: a state of four values, 500 steps an episode, and the checks of
// the action's range and of a step outside an episode.
class ClassicControl : public Env {
 public:
  explicit ClassicControl(const char* name) : name_(name) {}
  int maxSteps() const override { return 500; }
  std::vector<double> state() const override { return {s_.begin(), s_.end()}; }
  void setState(const std::vector<double>& state) override {
    if (state.size() != 4)
      throw InvalidArgument(std::string(name_) + ": a state has 4 values, not " + std::to_string(state.size()));
    std::copy(state.begin(), state.end(), s_.begin());
    begin();
  }

 protected:
  std::array<double, 4> s_{};
  void checkStep(int action) {
    if (action < 0 || action >= actions())
      throw InvalidArgument(std::string(name_) + ": action " + std::to_string(action) + " is not in [0, " +
                            std::to_string(actions()) + ")");
    if (!started_) throw InvalidArgument(std::string(name_) + ": step() before reset()");
    if (ended_) throw InvalidArgument(std::string(name_) + ": step() after the episode ended: reset() first");
  }
  void begin() {
    started_ = true;
    ended_ = false;
    steps_ = 0;
  }
  // Counts the step; the episode ends when it terminated or reached maxSteps().
  void count(Step& s) {
    ++steps_;
    s.truncated = !s.terminated && steps_ >= maxSteps();
    ended_ = s.terminated || s.truncated;
  }

 private:
  const char* name_;
  bool started_ = false;
  bool ended_ = false;
  int steps_ = 0;
};

std::array<double, 4> uniformState(std::uint64_t seed, double bound) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> u(-bound, bound);
  std::array<double, 4> s{};
  for (double& v : s) v = u(engine);
  return s;
}


class CartPole final : public ClassicControl {
 public:
  CartPole() : ClassicControl("cartpole") {}
  std::vector<float> reset(std::uint64_t seed) override {
    s_ = uniformState(seed, 0.05);
    begin();
    return observation();
  }

  Step step(int action) override {
    checkStep(action);
    constexpr double g = 9.8, massCart = 1.0, massPole = 0.1, total = massCart + massPole, halfLength = 0.5,
                     poleMassLength = massPole * halfLength, forceMag = 10.0, tau = 0.02;
    auto& [x, xDot, theta, thetaDot] = s_;
    const double force = action == 1 ? forceMag : -forceMag;
    const double cosTheta = std::cos(theta), sinTheta = std::sin(theta);
    const double temp = (force + poleMassLength * thetaDot * thetaDot * sinTheta) / total;
    const double thetaAcc =
        (g * sinTheta - cosTheta * temp) / (halfLength * (4.0 / 3.0 - massPole * cosTheta * cosTheta / total));
    const double xAcc = temp - poleMassLength * thetaAcc * cosTheta / total;
    x += tau * xDot;
    xDot += tau * xAcc;
    theta += tau * thetaDot;
    thetaDot += tau * thetaAcc;

    constexpr double thetaLimit = 12 * 2 * kPi / 360, xLimit = 2.4;
    Step s;
    s.observation = observation();
    s.terminated = x < -xLimit || x > xLimit || theta < -thetaLimit || theta > thetaLimit;
    s.reward = 1.0;
    count(s);
    return s;
  }

  int observationSize() const override { return 4; }
  int actions() const override { return 2; }

 private:
  std::vector<float> observation() const { return {static_cast<float>(s_[0]), static_cast<float>(s_[1]),
                                                   static_cast<float>(s_[2]), static_cast<float>(s_[3])}; }
};

class Acrobot final : public ClassicControl {
 public:
  Acrobot() : ClassicControl("acrobot") {}
  std::vector<float> reset(std::uint64_t seed) override {
    s_ = uniformState(seed, 0.1);
    begin();
    return observation();
  }

  Step step(int action) override {
    checkStep(action);
    const double torque = static_cast<double>(action) - 1.0;  // −1, 0, +1
    constexpr double dt = 0.2;
    // One Runge-Kutta step of the state's derivative (the torque held).
    auto add = [](const std::array<double, 4>& a, const std::array<double, 4>& b, double h) {
      return std::array<double, 4>{a[0] + h * b[0], a[1] + h * b[1], a[2] + h * b[2], a[3] + h * b[3]};
    };
    const std::array<double, 4> k1 = derivative(s_, torque);
    const std::array<double, 4> k2 = derivative(add(s_, k1, dt / 2), torque);
    const std::array<double, 4> k3 = derivative(add(s_, k2, dt / 2), torque);
    const std::array<double, 4> k4 = derivative(add(s_, k3, dt), torque);
    for (int i = 0; i < 4; ++i) s_[i] += dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    s_[0] = wrap(s_[0]);
    s_[1] = wrap(s_[1]);
    s_[2] = std::clamp(s_[2], -4 * kPi, 4 * kPi);
    s_[3] = std::clamp(s_[3], -9 * kPi, 9 * kPi);

    Step s;
    s.observation = observation();
    s.terminated = -std::cos(s_[0]) - std::cos(s_[1] + s_[0]) > 1.0;
    s.reward = s.terminated ? 0.0 : -1.0;
    count(s);
    return s;
  }

  int observationSize() const override { return 6; }
  int actions() const override { return 3; }

  // The book's equations of motion: (θ̇1, θ̇2, θ̈1, θ̈2) at state s under torque a.
  static std::array<double, 4> derivative(const std::array<double, 4>& s, double a) {
    constexpr double m1 = 1, m2 = 1, l1 = 1, lc1 = 0.5, lc2 = 0.5, i1 = 1, i2 = 1, g = 9.8;
    const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    const double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + i1 + i2;
    const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + i2;
    const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - kPi / 2);
    const double phi1 = -m2 * l1 * lc2 * dtheta2 * dtheta2 * std::sin(theta2) -
                        2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                        (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - kPi / 2) + phi2;
    const double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1 * dtheta1 * std::sin(theta2) - phi2) /
                            (m2 * lc2 * lc2 + i2 - d2 * d2 / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    return {dtheta1, dtheta2, ddtheta1, ddtheta2};
  }

 private:
  static double wrap(double x) {
    while (x > kPi) x -= 2 * kPi;
    while (x < -kPi) x += 2 * kPi;
    return x;
  }
  std::vector<float> observation() const {
    return {static_cast<float>(std::cos(s_[0])), static_cast<float>(std::sin(s_[0])),
            static_cast<float>(std::cos(s_[1])), static_cast<float>(std::sin(s_[1])),
            static_cast<float>(s_[2]),           static_cast<float>(s_[3])};
  }
};

}  // namespace

std::unique_ptr<Env> makeEnv(const std::string& name) {
  if (name == "cartpole") return std::make_unique<CartPole>();
  if (name == "acrobot") return std::make_unique<Acrobot>();
  throw InvalidArgument("unknown environment '" + name + "': cartpole or acrobot");
}

}  // namespace gyre::rl
