#include "rl/learn/unroll_actor.h"

#include <algorithm>
#include <cmath>

namespace gyre::rl {

PolicyActor::PolicyActor(std::string env, int index, std::uint64_t seed, int hidden)
    : env_(makeEnv(env)),
      rng_(seed * 6151 + static_cast<std::uint64_t>(index)),
      episodeSeed_(firstEpisodeSeed(seed, index)),
      net_(makeMlp(env_->observationSize(), env_->actions() + 1, hidden)),
      instance_(newInstanceId()) {}

Trajectory PolicyActor::unroll(WeightsRef weights, std::int64_t version, int steps) {
  refreshWeights(net_, version_, weights, version);
  const int actions = env_->actions();
  Trajectory t;
  t.observationSize = env_->observationSize();
  t.actions = actions;
  t.instance = instance_;
  if (observation_.empty()) observation_ = env_->reset(episodeSeed_++);
  ::torch::NoGradGuard noGrad;
  for (int s = 0; s < steps; ++s) {
    t.observations.insert(t.observations.end(), observation_.begin(), observation_.end());
    const ::torch::Tensor out =
        net_->forward(::torch::from_blob(observation_.data(), {static_cast<long>(observation_.size())}))
            .slice(0, 0, actions)
            .contiguous();
    const float* logits = out.data_ptr<float>();
    t.logits.insert(t.logits.end(), logits, logits + actions);
    // Sample from softmax(logits).
    const float top = *std::max_element(logits, logits + actions);
    std::vector<double> p(static_cast<std::size_t>(actions));
    for (int a = 0; a < actions; ++a) p[static_cast<std::size_t>(a)] = std::exp(logits[a] - top);
    const int action = std::discrete_distribution<int>(p.begin(), p.end())(rng_);
    Step step = env_->step(action);
    t.taken.push_back(action);
    t.rewards.push_back(static_cast<float>(step.reward));
    episodeReturn_ += step.reward;
    const bool done = step.terminated || step.truncated;
    t.dones.push_back(done ? 1.0f : 0.0f);
    if (done) {
      t.episodeReturns.push_back(episodeReturn_);
      episodeReturn_ = 0;
      observation_ = env_->reset(episodeSeed_++);
    } else {
      observation_ = std::move(step.observation);
    }
  }
  t.observations.insert(t.observations.end(), observation_.begin(), observation_.end());
  return t;
}

}  // namespace gyre::rl

GYRE_RT_ACTOR(gyre::rl::PolicyActor, std::string, int, std::uint64_t, int);
GYRE_RT_METHOD(gyre::rl::PolicyActor, unroll);
