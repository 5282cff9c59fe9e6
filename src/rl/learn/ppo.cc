// PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"): the rollout actors unroll
// the newest policy (PolicyActor, as IMPALA's), and the learner trains the actor-critic on each
// batch of --trajectories unrolls for --ppo-epochs passes in minibatches of --minibatch steps, on
// the clipped surrogate
//     L = −E[min(r·A, clip(r, 1−ε, 1+ε)·A)] + c_v·½E[(V − R)²] − c_e·E[H(π)],   r = π(a|s) / μ(a|s),
// with μ the policy the actor acted on (its logits travel with the trajectory), A the generalized
// advantage estimate (GAE, λ = --gae-lambda) from the learner's values at the batch's start,
// normalized over the batch, and R = A + V its return. Costs per update: ppoEpochs × the batch's
// forward and backward passes; the actors wait while the learner trains (on-policy: at most one
// batch is unrolled ahead of it).
#include <torch/torch.h>

#include "rl/learn/common.h"
#include "rl/learn/learners.h"
#include "rl/learn/nets.h"
#include "rl/learn/unroll_actor.h"

namespace gyre::rl {
namespace {

class PpoLearner {
 public:
  PpoLearner(int observations, int actions, const RlOptions& o)
      : o_(o),
        actions_(actions),
        net_(makeMlp(observations, actions + 1, o.hidden)),
        adam_(net_->parameters(), ::torch::optim::AdamOptions(learningRate(o)).eps(1e-5)) {}

  void update(std::vector<Trajectory>& trajectories) {
    const UnrollBatch b = stackUnrolls(trajectories);
    const long t = b.taken.size(1);
    const long dim = b.observations.size(2);
    const ::torch::Tensor& obs = b.observations;
    const ::torch::Tensor& taken = b.taken;
    const ::torch::Tensor& rewards = b.rewards;
    const ::torch::Tensor notDone = 1 - b.dones;
    const ::torch::Tensor& behaviour = b.behaviour;

    // GAE from the values before this update.
    ::torch::Tensor advantages, returns;
    {
      ::torch::NoGradGuard noGrad;
      const ::torch::Tensor values = net_->forward(obs).select(2, actions_);  // B, T+1
      advantages = ::torch::zeros_like(rewards);
      ::torch::Tensor next = ::torch::zeros({rewards.size(0)});
      for (long s = t - 1; s >= 0; --s) {
        const ::torch::Tensor delta = rewards.select(1, s) +
                                      o_.gamma * notDone.select(1, s) * values.select(1, s + 1) -
                                      values.select(1, s);
        next = delta + o_.gamma * o_.gaeLambda * notDone.select(1, s) * next;
        advantages.select(1, s).copy_(next);
      }
      returns = advantages + values.slice(1, 0, t);
    }
    const long n = static_cast<long>(trajectories.size()) * t;
    const ::torch::Tensor flatObs = obs.slice(1, 0, t).reshape({n, dim});
    const ::torch::Tensor flatTaken = taken.reshape({n, 1});
    const ::torch::Tensor oldLogp = ::torch::log_softmax(behaviour.reshape({n, actions_}), 1).gather(1, flatTaken).squeeze(1);
    ::torch::Tensor flatAdv = advantages.reshape({n});
    flatAdv = (flatAdv - flatAdv.mean()) / (flatAdv.std() + 1e-8);
    const ::torch::Tensor flatReturns = returns.reshape({n});
    const long size = std::min<long>(o_.minibatch, n);
    for (int epoch = 0; epoch < o_.ppoEpochs; ++epoch) {
      const ::torch::Tensor order = ::torch::randperm(n, ::torch::kLong);
      for (long start = 0; start + size <= n; start += size) {
        const ::torch::Tensor idx = order.slice(0, start, start + size);
        const ::torch::Tensor out = net_->forward(flatObs.index_select(0, idx));
        const ::torch::Tensor logp = ::torch::log_softmax(out.slice(1, 0, actions_), 1);
        const ::torch::Tensor takenLogp = logp.gather(1, flatTaken.index_select(0, idx)).squeeze(1);
        const ::torch::Tensor ratio = (takenLogp - oldLogp.index_select(0, idx)).exp();
        const ::torch::Tensor adv = flatAdv.index_select(0, idx);
        const ::torch::Tensor surrogate =
            ::torch::min(ratio * adv, ::torch::clamp(ratio, 1 - o_.clip, 1 + o_.clip) * adv);
        const ::torch::Tensor valueLoss = 0.5 * (out.select(1, actions_) - flatReturns.index_select(0, idx)).pow(2).mean();
        const ::torch::Tensor entropy = -(logp.exp() * logp).sum(1).mean();
        const ::torch::Tensor loss = -surrogate.mean() + o_.baselineCost * valueLoss - o_.entropyCost * entropy;
        adam_.zero_grad();
        loss.backward();
        ::torch::nn::utils::clip_grad_norm_(net_->parameters(), 0.5);
        adam_.step();
      }
    }
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

RlProgress runPpo(rt::Runtime& rt, const RlOptions& o, const std::function<void(const RlProgress&)>& report) {
  const EnvShape env = seedAndProbe(o);
  PpoLearner learner(env.observations, env.actions, o);
  UnrollLearner l;
  l.update = [&](std::vector<Trajectory>& batch) { learner.update(batch); };
  l.weights = [&] { return learner.weights(); };
  l.load = [&](const Weights& w) { learner.load(w); };
  l.onPolicy = true;
  return runUnrollLearner(rt, o, env, l, report);
}

}  // namespace gyre::rl
