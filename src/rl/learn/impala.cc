// IMPALA (Espeholt et al. 2018): rollout actors unroll their copy of the policy and send the
// trajectories with the logits they acted on; the learner trains the actor-critic on batches of
// them, with V-trace correcting for the lag between the actors' policy and its own.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <random>
#include <thread>

#include "gyre/errors.h"
#include "gyre/rl/env.h"
#include "rl/learn/common.h"
#include "rl/learn/learners.h"
#include "rl/learn/nets.h"
#include "rl/learn/unroll_actor.h"
#include "rl/learn/vtrace.h"

namespace gyre::rl {


namespace {

// The actor-critic learner: V-trace targets and advantages from the batch's rewards, the
// learner's values and the ratios of its policy to the actors'; the policy-gradient loss, the
// value loss (× baselineCost) and the entropy bonus (× entropyCost), summed over the batch, as in
// the paper.
class ImpalaLearner {
 public:
  ImpalaLearner(int observations, int actions, const RlOptions& o)
      : o_(o),
        actions_(actions),
        net_(makeMlp(observations, actions + 1, o.hidden)),
        adam_(net_->parameters(), ::torch::optim::AdamOptions(learningRate(o))) {}

  void update(std::vector<Trajectory>& trajectories) {
    const UnrollBatch b = stackUnrolls(trajectories);
    const long t = b.taken.size(1);
    const ::torch::Tensor& obs = b.observations;
    const ::torch::Tensor taken = b.taken.unsqueeze(2);
    const ::torch::Tensor& rewards = b.rewards;
    const ::torch::Tensor& dones = b.dones;
    const ::torch::Tensor& behaviour = b.behaviour;

    const ::torch::Tensor out = net_->forward(obs);  // B, T+1, A+1
    const ::torch::Tensor logits = out.slice(2, 0, actions_).slice(1, 0, t);
    const ::torch::Tensor values = out.select(2, actions_);  // B, T+1
    const ::torch::Tensor logp = ::torch::log_softmax(logits, 2);
    const ::torch::Tensor taken_logp = logp.gather(2, taken).squeeze(2);
    const ::torch::Tensor behaviourLogp = ::torch::log_softmax(behaviour, 2).gather(2, taken).squeeze(2);
    const VTrace targets = vtrace(rewards, o_.gamma * (1 - dones), values,
                                  taken_logp.detach() - behaviourLogp, o_.rhoBar, o_.cBar);
    const ::torch::Tensor& vs = targets.vs;
    const ::torch::Tensor& advantages = targets.advantages;
    const ::torch::Tensor policyLoss = -(taken_logp * advantages).sum();
    const ::torch::Tensor valueLoss = 0.5 * (vs - values.slice(1, 0, t)).pow(2).sum();
    const ::torch::Tensor entropy = -(logp.exp() * logp).sum();
    const ::torch::Tensor loss = policyLoss + o_.baselineCost * valueLoss - o_.entropyCost * entropy;
    adam_.zero_grad();
    loss.backward();
    ::torch::nn::utils::clip_grad_norm_(net_->parameters(), 40.0);
    adam_.step();
  }

  Weights weights() { return flatWeights(*net_); }
  void load(const Weights& w) { loadWeights(*net_, w); }

 private:
  const RlOptions& o_;
  int actions_;
  ::torch::nn::Sequential net_;
  ::torch::optim::Adam adam_;
};

}  // namespace

RlProgress runImpala(rt::Runtime& rt, const RlOptions& o,
                     const std::function<void(const RlProgress&)>& report) {
  const EnvShape env = seedAndProbe(o);
  ImpalaLearner learner(env.observations, env.actions, o);
  UnrollLearner l;
  l.update = [&](std::vector<Trajectory>& batch) { learner.update(batch); };
  l.weights = [&] { return learner.weights(); };
  l.load = [&](const Weights& w) { learner.load(w); };
  return runUnrollLearner(rt, o, env, l, report);
}

}  // namespace gyre::rl
