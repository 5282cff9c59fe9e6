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

  void update(std::vector<Trajectory>& batch) {
    const auto t = static_cast<long>(batch.front().taken.size());
    const long dim = batch.front().observationSize;
    auto stack = [&](auto member, std::vector<long> shape, ::torch::ScalarType type) {
      std::vector<::torch::Tensor> parts;
      for (Trajectory& tr : batch) parts.push_back(::torch::from_blob((tr.*member).data(), shape, type));
      return ::torch::stack(parts);
    };
    const ::torch::Tensor obs =
        stack(&Trajectory::observations, {t + 1, dim}, ::torch::kFloat32);  // B, T+1, D
    const ::torch::Tensor taken =
        stack(&Trajectory::taken, {t}, ::torch::kInt32).to(::torch::kLong).unsqueeze(2);
    const ::torch::Tensor rewards = stack(&Trajectory::rewards, {t}, ::torch::kFloat32);
    const ::torch::Tensor dones = stack(&Trajectory::dones, {t}, ::torch::kFloat32);
    const ::torch::Tensor behaviour = stack(&Trajectory::logits, {t, actions_}, ::torch::kFloat32);

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
  Evaluation evaluation(rt, o, env.actions + 1);
  Publisher weights(rt, learner.weights());
  std::vector<rt::ActorHandle<PolicyActor>> handles;
  for (int i = 0; i < o.actors; ++i)
    handles.push_back(rt.actorWith<PolicyActor>(rolloutPlacement(rt, i, o), o.env, i, o.seed, o.hidden));
  RolloutActors<PolicyActor, Trajectory> actors(std::move(handles), unrollOf(o));
  std::deque<Trajectory> queue;  // unrolls waiting for the learner; the actors wait beyond 2 batches

  Progress progress(o, report);
  RlProgress& p = progress.now();
  auto enqueue = [&](Trajectory tr) {
    const auto steps = static_cast<std::int64_t>(tr.taken.size());
    queue.push_back(std::move(tr));
    return steps;
  };
  auto mayIssue = [&] {
    return queue.size() < 2 * static_cast<std::size_t>(trajectoriesOf(o)) &&
           (o.maxEnvSteps <= 0 || p.envSteps + actors.issuedSteps() < o.maxEnvSteps);
  };
  auto unroll = [&](rt::ActorHandle<PolicyActor>& actor) {
    return actor.call(&PolicyActor::unroll, weights.latest(), weights.version(), unrollOf(o));
  };
  while (!progress.over()) {
    bool busy = actors.poll(progress, enqueue, mayIssue, unroll);
    if (queue.size() >= static_cast<std::size_t>(trajectoriesOf(o))) {
      busy = true;
      std::vector<Trajectory> batch(std::make_move_iterator(queue.begin()),
                                    std::make_move_iterator(queue.begin() + trajectoriesOf(o)));
      queue.erase(queue.begin(), queue.begin() + trajectoriesOf(o));
      learner.update(batch);
      ++p.updates;
      weights.publish(learner.weights());  // the actors unroll the newest policy, as in the paper
    }
    endOfTurn(evaluation, weights, progress, busy);
  }
  actors.drain();
  evaluation.drain();
  return progress.finish();
}

}  // namespace gyre::rl
