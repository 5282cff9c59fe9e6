// CartPole from gyre::rl (link gyre::rl), played by a fixed rule: push the cart the way the pole
// leans. A random policy lasts about 20 steps; this one balances far longer, with no learning at
// all. `gyre rl --algo apex --env cartpole` trains a policy that lasts the whole 500 steps.
#include <gyre/rl/env.h>

#include <cstdio>
#include <memory>

int main() {
  std::unique_ptr<gyre::rl::Env> env = gyre::rl::makeEnv("cartpole");
  for (std::uint64_t episode = 0; episode < 3; ++episode) {
    std::vector<float> observation = env->reset(episode);
    double total = 0;
    for (;;) {
      // observation: cart position and velocity, pole angle and angular velocity.
      const int action = observation[2] + 0.5f * observation[3] > 0 ? 1 : 0;
      const gyre::rl::Step step = env->step(action);
      total += step.reward;
      if (step.terminated || step.truncated) break;
      observation = step.observation;
    }
    std::printf("episode %llu: return %.0f\n", static_cast<unsigned long long>(episode), total);
  }
}
