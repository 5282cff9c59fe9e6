// `gyre rl`'s options, declared once: the gyre tool's flags, gyre_rl_worker's flags (the same
// parser), their checks and the arguments the tool hands its workers. libtorch-free: the gyre tool
// links it without the learners. docs/rl.md describes them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::rl {

struct RlOptions {
  std::string algo = "apex";   // apex (impala: not built yet)
  std::string env = "cartpole";  // cartpole or acrobot
  int actors = 2;                // rollout actors, one process each, beside the learner's
  double timeLimitS = 600;       // stop after this long (seconds), solved or not
  double targetReturn = 475;     // solved when the mean greedy return of the last 100 episodes reaches it
  std::int64_t maxEnvSteps = 0;  // stop after this many environment steps (0: no limit)
  std::uint64_t seed = 1;
  std::string runDir;  // metrics.jsonl, return.svg; default runs/rl-<algo>-<env>-<time>
  // The learner (double DQN on n-step returns, Huber loss, Adam).
  double lr = 5e-4;
  int batch = 64;
  int hidden = 128;  // two hidden layers of this width
  int nStep = 3;
  double gamma = 0.99;
  // The prioritized replay (Schaul et al.): capacity, α, and β annealed from betaStart to 1 over
  // betaSteps env steps.
  std::int64_t replayCapacity = 100000;
  double alpha = 0.6;
  double betaStart = 0.4;
  std::int64_t betaSteps = 100000;
  std::int64_t learningStarts = 1000;  // env steps in the replay before the first update
  // At most this many env steps per learner update (the actors wait beyond it; 0: no limit).
  double stepsPerUpdate = 2;
  int targetUpdate = 500;  // updates between copies of the online network to the target network
  int publishEvery = 50;   // updates between weights published to the actors
  int evalEvery = 50;      // updates between greedy evaluation episodes
  int rolloutSteps = 64;   // env steps an actor takes per call
  double reportEvery = 2;  // seconds between live lines (and metrics.jsonl records)
  int actorRestarts = 10;  // times a lost actor is rebuilt on a live process
};

// The flags on `app` (the gyre tool's `rl` subcommand, or the worker's own).
void addRlFlags(CLI::App& app, RlOptions& o);
// Throws InvalidArgument naming the flag for a value out of its range or choices.
void validateRlOptions(const RlOptions& o);
// The flags that give a worker the same options.
std::vector<std::string> rlWorkerArguments(const RlOptions& o);

}  // namespace gyre::rl
