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
#include "rl/learn/vtrace.h"

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

// The network's outputs: the policy's logits, then the value.
class ImpalaActor {
 public:
  ImpalaActor(std::string env, int index, std::uint64_t seed, int hidden)
      : env_(makeEnv(env)),
        rng_(seed * 6151 + static_cast<std::uint64_t>(index)),
        episodeSeed_(firstEpisodeSeed(seed, index)),
        net_(makeMlp(env_->observationSize(), env_->actions() + 1, hidden)),
        instance_(newInstanceId()) {}

  Trajectory unroll(WeightsRef weights, std::int64_t version, int steps) {
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

GYRE_RT_ACTOR(ImpalaActor, std::string, int, std::uint64_t, int);
GYRE_RT_METHOD(ImpalaActor, unroll);

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
  std::vector<rt::ActorHandle<ImpalaActor>> handles;
  for (int i = 0; i < o.actors; ++i)
    handles.push_back(rt.actorWith<ImpalaActor>(rolloutPlacement(rt, i, o), o.env, i, o.seed, o.hidden));
  RolloutActors<ImpalaActor, Trajectory> actors(std::move(handles), o.unroll);
  std::deque<Trajectory> queue;  // unrolls waiting for the learner; the actors wait beyond 2 batches

  Progress progress(o, report);
  RlProgress& p = progress.now();
  auto enqueue = [&](Trajectory tr) {
    const auto steps = static_cast<std::int64_t>(tr.taken.size());
    queue.push_back(std::move(tr));
    return steps;
  };
  auto mayIssue = [&] {
    return queue.size() < 2 * static_cast<std::size_t>(o.trajectories) &&
           (o.maxEnvSteps <= 0 || p.envSteps + actors.issuedSteps() < o.maxEnvSteps);
  };
  auto unroll = [&](rt::ActorHandle<ImpalaActor>& actor) {
    return actor.call(&ImpalaActor::unroll, weights.latest(), weights.version(), o.unroll);
  };
  while (!progress.over()) {
    bool busy = actors.poll(progress, enqueue, mayIssue, unroll);
    if (queue.size() >= static_cast<std::size_t>(o.trajectories)) {
      busy = true;
      std::vector<Trajectory> batch(std::make_move_iterator(queue.begin()),
                                    std::make_move_iterator(queue.begin() + o.trajectories));
      queue.erase(queue.begin(), queue.begin() + o.trajectories);
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
