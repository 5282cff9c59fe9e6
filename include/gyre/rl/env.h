// Classic-control environments for reinforcement learning, written from their published
// equations (docs/rl.md): CartPole (Barto, Sutton and Anderson 1983, with the corrected dynamics
// of Florian 2005; the v1 rules: ±12° or ±2.4 m ends an episode, 500 steps truncate it) and
// Acrobot (Sutton 1996, the book's dynamics; 500 steps). Observations are float32, as Gym's.
//
//   std::unique_ptr<gyre::rl::Env> env = gyre::rl::makeEnv("cartpole");
//   std::vector<float> obs = env->reset(seed);
//   gyre::rl::Step s = env->step(action);   // s.observation, s.reward, s.terminated, s.truncated
//
// Not thread-safe: one environment per thread (an actor holds its own).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gyre::rl {

struct Step {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;  // the episode ended by the task's rule (the pole fell, the goal reached)
  bool truncated = false;   // the episode reached its step limit
};

class Env {
 public:
  virtual ~Env() = default;
  // Starts an episode from a state drawn with `seed`; its observation.
  virtual std::vector<float> reset(std::uint64_t seed) = 0;
  // One step with action in [0, actions()). InvalidArgument for another action, and for a step
  // before reset() or after the episode ended.
  virtual Step step(int action) = 0;
  virtual int observationSize() const = 0;
  virtual int actions() const = 0;
  virtual int maxSteps() const = 0;
  // The full state (CartPole: x, ẋ, θ, θ̇; Acrobot: θ1, θ2, θ̇1, θ̇2), and setting it (which starts
  // an episode there), for tests and for replaying a trajectory.
  virtual std::vector<double> state() const = 0;
  virtual void setState(const std::vector<double>& state) = 0;
};

// "cartpole" or "acrobot"; InvalidArgument naming the ones there are otherwise.
std::unique_ptr<Env> makeEnv(const std::string& name);

}  // namespace gyre::rl
