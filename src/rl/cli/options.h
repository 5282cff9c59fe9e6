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
  std::string algo = "apex";     // apex, impala or ppo
  std::string env = "cartpole";  // cartpole or acrobot
  int actors = 2;                // rollout actors, one process each, beside the learner's
  double timeLimitS = 600;       // stop after this long (seconds), solved or not
  double targetReturn = 475;     // solved when the mean greedy return of the last 100 episodes reaches it
  std::int64_t maxEnvSteps = 0;  // stop after this many environment steps (0: no limit)
  std::uint64_t seed = 1;
  std::string runDir;  // metrics.jsonl, return.svg; default runs/rl-<algo>-<env>-<time>
  // The policy on disk (rl/learn/policy_files.h): kept in checkpointDir/policy.json, the run
  // started from resume (a directory's policy.json, or a policy file), written to exportPath at
  // the end. Empty: none.
  std::string checkpointDir;
  std::string resume;
  std::string exportPath;
  // Both learners: Adam's rate (0: the algorithm's own, learningRate()), two hidden layers of
  // `hidden`, the discount.
  double lr = 0;
  int hidden = 128;
  double gamma = 0.99;
  // Ape-X's learner: a double DQN on n-step returns, Huber loss, `batch` transitions an update.
  int batch = 64;
  int nStep = 3;
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
  int rolloutSteps = 64;   // env steps an Ape-X actor takes per call
  // IMPALA: each actor call unrolls `unroll` steps; an update trains on `trajectories` of them
  // with V-trace (ρ̄ = rhoBar, c̄ = cBar), the policy-gradient loss plus baselineCost × the value
  // loss minus entropyCost × the policy's entropy.
  // PPO (ppo.cc) unrolls and batches the same way (0: the algorithm's own, unrollOf() and
  // trajectoriesOf()).
  int unroll = 0;
  int trajectories = 0;
  double rhoBar = 1;
  double cBar = 1;
  double baselineCost = 0.5;
  double entropyCost = 0.01;
  // PPO: `ppoEpochs` passes over each batch in minibatches of `minibatch` steps, the surrogate's
  // ratio clipped to 1 ± clip, GAE(λ = gaeLambda) advantages.
  int ppoEpochs = 4;
  int minibatch = 256;
  double clip = 0.2;
  double gaeLambda = 0.95;
  double evalInterval = 0.05;  // seconds between the starts of greedy evaluation episodes
  double reportEvery = 2;      // seconds between live lines (and metrics.jsonl records)
  int actorRestarts = 10;      // times a lost actor is rebuilt on a live process
};

// --lr, or the algorithm's own rate when it is 0: 5e-4 for apex, 1e-3 for impala and ppo.
double learningRate(const RlOptions& o);
// --unroll and --trajectories, or the algorithm's own when 0: IMPALA 50 steps x 8, PPO 128 x 8.
int unrollOf(const RlOptions& o);
int trajectoriesOf(const RlOptions& o);

// The flags on `app` (the gyre tool's `rl` subcommand, or the worker's own).
void addRlFlags(CLI::App& app, RlOptions& o);
// Throws InvalidArgument naming the flag for a value out of its range or choices.
void validateRlOptions(const RlOptions& o);
// The flags that give a worker the same options.
std::vector<std::string> rlWorkerArguments(const RlOptions& o);

}  // namespace gyre::rl
