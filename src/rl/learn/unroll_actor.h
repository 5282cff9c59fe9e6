// The rollout actor of the actor-critic learners (IMPALA, impala.cc; PPO, ppo.cc): it unrolls its
// copy of the policy for a given number of steps and sends back the trajectory with the logits it
// acted on. Registered (GYRE_RT_ACTOR) in impala.cc.
#pragma once

#include <torch/torch.h>

#include <cstdint>
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

}  // namespace gyre::rl
