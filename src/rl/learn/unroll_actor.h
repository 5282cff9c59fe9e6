// The rollout actor of the actor-critic learners (IMPALA, impala.cc; PPO, ppo.cc): it unrolls its
// copy of the policy for a given number of steps and sends back the trajectory with the logits it
// acted on. Registered (GYRE_RT_ACTOR) in impala.cc.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gyre/rl/env.h"
#include "rl/learn/common.h"
#include "rl/learn/nets.h"

namespace gyre::rl {

// One unroll of an actor: T steps from T + 1 observations (the last one, where the next unroll
// starts, for the bootstrap value), the actions, rewards, whether each step ended an episode, and
// the logits of the actor's policy at each step.
struct Trajectory {
  std::int32_t observationSize = 0;
  std::int32_t actions = 0;
  std::vector<float> observations;  // (T + 1) × observationSize
  std::vector<std::int32_t> taken;
  std::vector<float> rewards;
  std::vector<float> dones;   // 1: the episode ended with this step (terminated or truncated)
  std::vector<float> logits;  // T × actions
  std::vector<double> episodeReturns;
  std::uint64_t instance = 0;  // new when the actor was rebuilt after its process was lost
  MSGPACK_DEFINE(observationSize, actions, observations, taken, rewards, dones, logits, episodeReturns,
                 instance)
};

// Unrolls a stochastic policy (the network's outputs: the policy's logits, then the value) in its
// own environment, sampling each action from softmax(logits).
class PolicyActor {
 public:
  PolicyActor(std::string env, int index, std::uint64_t seed, int hidden);
  // `steps` steps with the weights of `version` (fetched when they changed), going on from where
  // the last unroll stopped.
  Trajectory unroll(WeightsRef weights, std::int64_t version, int steps);

 private:
  std::unique_ptr<Env> env_;
  std::mt19937_64 rng_;
  std::uint64_t episodeSeed_;
  ::torch::nn::Sequential net_;
  std::uint64_t instance_;
  std::int64_t version_ = -1;
  std::vector<float> observation_;
  double episodeReturn_ = 0;
};

// A batch of B unrolls of T steps as tensors.
struct UnrollBatch {
  ::torch::Tensor observations;  // B, T + 1, D
  ::torch::Tensor taken;         // B, T (int64)
  ::torch::Tensor rewards;       // B, T
  ::torch::Tensor dones;         // B, T: 1 where the step ended an episode
  ::torch::Tensor behaviour;     // B, T, A: the logits the actor acted on
};
// The trajectories' tensors (views of their vectors, stacked: `batch` must outlive nothing).
UnrollBatch stackUnrolls(std::vector<Trajectory>& batch);

// What an actor-critic learner gives the loop: its update on a batch, and its weights to publish.
struct UnrollLearner {
  std::function<void(std::vector<Trajectory>&)> update;
  std::function<Weights()> weights;
  std::function<void(const Weights&)> load;  // --resume's weights into the network
  // On-policy (PPO): at most one batch of unrolls queued or in flight, so the actors unroll the
  // newest weights; else (IMPALA) up to two batches may wait for the learner.
  bool onPolicy = false;
};

// The loop both learners share: PolicyActors (one per --actors) unroll unrollOf(o) steps of the
// newest published weights; every trajectoriesOf(o) unrolls the learner updates and the weights
// are published; a greedy evaluator runs beside. Until solved, --time-limit or --max-env-steps.
RlProgress runUnrollLearner(rt::Runtime& rt, const RlOptions& o, const EnvShape& env, const UnrollLearner& learner,
                            const std::function<void(const RlProgress&)>& report);

}  // namespace gyre::rl
