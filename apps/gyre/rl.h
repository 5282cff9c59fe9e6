// `gyre rl`: distributed reinforcement learning on gyre::rt (Ape-X DQN on CartPole or Acrobot). It
// checks the flags, prepares a run directory and starts the learner and one process per rollout
// actor (gyre_rl_worker) through the launcher with --keep-going, so that a lost actor process does
// not stop the run. The gyre tool stays libtorch-free. See docs/rl.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addRl(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
