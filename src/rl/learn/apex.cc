#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "gyre/errors.h"
#include "gyre/rl/env.h"
#include "gyre/rl/replay.h"
#include "rl/learn/common.h"
#include "rl/learn/learners.h"
#include "rl/learn/nets.h"
#include "rl/learn/policy_files.h"

namespace gyre::rl {

// One call's worth of an actor's experience.
struct Rollout {
  Transitions transitions;
  std::vector<float> priorities;  // |TD error| under the actor's weights, one per transition
  std::vector<double> episodeReturns;
  std::int64_t envSteps = 0;
  std::uint64_t instance = 0;  // new when the actor was rebuilt after its process was lost
  MSGPACK_DEFINE(transitions, priorities, episodeReturns, envSteps, instance)
};

namespace {

// A batch of transitions as tensors over its columns (no copy: they view `t`).
struct TransitionTensors {
  ::torch::Tensor observations, next, actions, returns, discounts;
};

TransitionTensors tensorsOf(Transitions& t) {
  const auto n = static_cast<long>(t.size());
  const long dim = t.observationSize;
  return {::torch::from_blob(t.observations.data(), {n, dim}),
          ::torch::from_blob(t.nextObservations.data(), {n, dim}),
          ::torch::from_blob(t.actions.data(), {n}, ::torch::kInt32).to(::torch::kLong),
          ::torch::from_blob(t.returns.data(), {n}), ::torch::from_blob(t.discounts.data(), {n})};
}

}  // namespace

// A rollout actor: its environment, its ε, a copy of the Q-network (the weights of the version it
// was last given) and the last n steps not yet made into transitions.
class ApexActor {
 public:
  ApexActor(std::string env, int index, double epsilon, std::uint64_t seed, int hidden, int nStep,
            double gamma)
      : env_(makeEnv(env)),
        epsilon_(epsilon),
        nStep_(static_cast<std::size_t>(nStep)),
        gamma_(static_cast<float>(gamma)),
        rng_(seed * 7919 + static_cast<std::uint64_t>(index)),
        episodeSeed_(firstEpisodeSeed(seed, index)),
        q_(makeMlp(env_->observationSize(), env_->actions(), hidden)),
        instance_(newInstanceId()) {}

  Rollout collect(WeightsRef weights, std::int64_t version, int steps) {
    refreshWeights(q_, version_, weights, version);
    Rollout out;
    out.instance = instance_;
    out.transitions.observationSize = env_->observationSize();
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::uniform_int_distribution<int> anyAction(0, env_->actions() - 1);
    if (observation_.empty()) observation_ = env_->reset(episodeSeed_++);
    for (int s = 0; s < steps; ++s) {
      const int action =
          uniform(rng_) < epsilon_ ? anyAction(rng_) : greedyAction(q_, observation_, env_->actions());
      Step step = env_->step(action);
      ++out.envSteps;
      episodeReturn_ += step.reward;
      pending_.push_back({std::move(observation_), action, static_cast<float>(step.reward)});
      observation_ = std::move(step.observation);
      if (pending_.size() == nStep_) emit(out.transitions, false);
      if (step.terminated || step.truncated) {
        while (!pending_.empty()) emit(out.transitions, step.terminated);
        out.episodeReturns.push_back(episodeReturn_);
        episodeReturn_ = 0;
        observation_ = env_->reset(episodeSeed_++);
      }
    }
    out.priorities = priorities(out.transitions);
    return out;
  }

 private:
  struct Pending {
    std::vector<float> observation;
    int action = 0;
    float reward = 0;
  };

  // The oldest pending step as a transition: the discounted rewards of the pending steps, and the
  // bootstrap from the current observation (none when the episode terminated).
  void emit(Transitions& t, bool terminal) {
    float ret = 0, discount = 1;
    for (const Pending& p : pending_) {
      ret += discount * p.reward;
      discount *= gamma_;
    }
    const Pending& first = pending_.front();
    t.observations.insert(t.observations.end(), first.observation.begin(), first.observation.end());
    t.actions.push_back(first.action);
    t.returns.push_back(ret);
    t.discounts.push_back(terminal ? 0.0f : discount);
    t.nextObservations.insert(t.nextObservations.end(), observation_.begin(), observation_.end());
    pending_.pop_front();
  }

  // Ape-X's initial priorities: the actors' own |TD error|, so that the learner need not first see
  // a transition to rank it.
  std::vector<float> priorities(Transitions& t) {
    const auto n = static_cast<long>(t.size());
    if (n == 0) return {};
    ::torch::NoGradGuard noGrad;
    const TransitionTensors x = tensorsOf(t);
    const ::torch::Tensor qa = q_->forward(x.observations).gather(1, x.actions.unsqueeze(1)).squeeze(1);
    const ::torch::Tensor target = x.returns + x.discounts * std::get<0>(q_->forward(x.next).max(1));
    const ::torch::Tensor td = (target - qa).abs().contiguous();
    return {td.data_ptr<float>(), td.data_ptr<float>() + n};
  }

  std::unique_ptr<Env> env_;
  double epsilon_;
  std::size_t nStep_;
  float gamma_;
  std::mt19937_64 rng_;
  std::uint64_t episodeSeed_;
  ::torch::nn::Sequential q_;
  std::int64_t version_ = -1;
  std::vector<float> observation_;
  std::deque<Pending> pending_;
  double episodeReturn_ = 0;
  std::uint64_t instance_;
};

// The prioritized replay as an actor: its calls run one at a time, in the order the learner made them.
class ApexReplay {
 public:
  ApexReplay(std::int64_t capacity, double alpha, std::uint64_t seed)
      : replay_(static_cast<std::size_t>(capacity), alpha, seed) {}
  std::int64_t add(const Transitions& t, const std::vector<float>& priorities) {
    replay_.add(t, priorities);
    return static_cast<std::int64_t>(replay_.size());
  }
  ReplaySample sample(int k, double beta) { return replay_.sample(static_cast<std::size_t>(k), beta); }
  int updatePriorities(const std::vector<std::int64_t>& indices, const std::vector<float>& priorities) {
    replay_.updatePriorities(indices, priorities);
    return static_cast<int>(indices.size());
  }

 private:
  PrioritizedReplay replay_;
};

GYRE_RT_ACTOR(ApexActor, std::string, int, double, std::uint64_t, int, int, double);
GYRE_RT_METHOD(ApexActor, collect);
GYRE_RT_ACTOR(ApexReplay, std::int64_t, double, std::uint64_t);
GYRE_RT_METHOD(ApexReplay, add);
GYRE_RT_METHOD(ApexReplay, sample);
GYRE_RT_METHOD(ApexReplay, updatePriorities);

double apexEpsilon(int i, int n) {
  if (n <= 1) return 0.1;
  return std::pow(0.4, 1.0 + 7.0 * i / (n - 1));
}

namespace {

// The double-DQN learner on n-step returns: the online network picks the next action, the target
// network values it; Huber loss weighted by the replay's importance weights.
class ApexLearner {
 public:
  ApexLearner(int observations, int actions, const RlOptions& o)
      : q_(makeMlp(observations, actions, o.hidden)),
        target_(makeMlp(observations, actions, o.hidden)),
        adam_(q_->parameters(), ::torch::optim::AdamOptions(learningRate(o))) {
    loadWeights(*target_, flatWeights(*q_));
  }

  // One update on `s`; the new priorities of its transitions.
  std::vector<float> update(ReplaySample& s) {
    const auto n = static_cast<long>(s.batch.size());
    const TransitionTensors x = tensorsOf(s.batch);
    const ::torch::Tensor weights = ::torch::from_blob(s.weights.data(), {n});
    ::torch::Tensor target;
    {
      ::torch::NoGradGuard noGrad;
      const ::torch::Tensor best = q_->forward(x.next).argmax(1, true);
      target = x.returns + x.discounts * target_->forward(x.next).gather(1, best).squeeze(1);
    }
    const ::torch::Tensor qa = q_->forward(x.observations).gather(1, x.actions.unsqueeze(1)).squeeze(1);
    const ::torch::Tensor loss =
        (weights *
         ::torch::nn::functional::smooth_l1_loss(
             qa, target, ::torch::nn::functional::SmoothL1LossFuncOptions().reduction(::torch::kNone)))
            .mean();
    adam_.zero_grad();
    loss.backward();
    ::torch::nn::utils::clip_grad_norm_(q_->parameters(), 10.0);
    adam_.step();
    const ::torch::Tensor td = ((target - qa.detach()).abs() + 1e-3).contiguous();
    return {td.data_ptr<float>(), td.data_ptr<float>() + n};
  }

  void syncTarget() { loadWeights(*target_, flatWeights(*q_)); }
  void load(const Weights& w) {
    loadWeights(*q_, w);
    syncTarget();
  }
  Weights weights() { return flatWeights(*q_); }

 private:
  ::torch::nn::Sequential q_;
  ::torch::nn::Sequential target_;
  ::torch::optim::Adam adam_;
};

}  // namespace

RlProgress runApex(rt::Runtime& rt, const RlOptions& o,
                   const std::function<void(const RlProgress&)>& report) {
  const EnvShape env = seedAndProbe(o);
  ApexLearner learner(env.observations, env.actions, o);
  PolicyFiles files(o, env, env.actions);
  if (const std::optional<Weights> w = files.resumed()) learner.load(*w);
  rt::ActorOptions here;
  here.rank = rt.rank();
  auto replay = rt.actorWith<ApexReplay>(here, o.replayCapacity, o.alpha, o.seed);
  Evaluation evaluation(rt, o, env.actions);
  Publisher weights(rt, learner.weights());
  std::vector<rt::ActorHandle<ApexActor>> handles;
  for (int i = 0; i < o.actors; ++i)
    handles.push_back(rt.actorWith<ApexActor>(rolloutPlacement(rt, i, o), o.env, i, apexEpsilon(i, o.actors),
                                              o.seed, o.hidden, o.nStep, o.gamma));
  RolloutActors<ApexActor, Rollout> actors(std::move(handles), o.rolloutSteps);
  std::optional<rt::Future<int>> lastPriorities;

  Progress progress(o, report);
  RlProgress& p = progress.now();
  std::int64_t stored = 0;
  auto store = [&](Rollout r) {
    stored = std::min(o.replayCapacity, stored + static_cast<std::int64_t>(r.transitions.size()));
    replay.call(&ApexReplay::add, r.transitions, r.priorities);
    return r.envSteps;
  };
  auto mayIssue = [&] {
    const std::int64_t steps = p.envSteps + actors.issuedSteps();
    const bool withinBudget =
        o.stepsPerUpdate <= 0 || static_cast<double>(steps) < static_cast<double>(o.learningStarts) +
                                                                 o.stepsPerUpdate * static_cast<double>(p.updates + 1);
    return withinBudget && (o.maxEnvSteps <= 0 || steps < o.maxEnvSteps);
  };
  auto collect = [&](rt::ActorHandle<ApexActor>& actor) {
    return actor.call(&ApexActor::collect, weights.latest(), weights.version(), o.rolloutSteps);
  };
  while (!progress.over()) {
    bool busy = actors.poll(progress, store, mayIssue, collect);
    if (stored >= o.learningStarts) {
      busy = true;
      const double beta = std::min(1.0, o.betaStart + (1.0 - o.betaStart) * static_cast<double>(p.envSteps) /
                                                          static_cast<double>(o.betaSteps));
      ReplaySample s = replay.call(&ApexReplay::sample, o.batch, beta).get();
      std::vector<float> priorities = learner.update(s);
      lastPriorities = replay.call(&ApexReplay::updatePriorities, s.indices, priorities);
      ++p.updates;
      if (p.updates % o.targetUpdate == 0) learner.syncTarget();
      if (p.updates % o.publishEvery == 0) weights.publish(learner.weights());
    }
    endOfTurn(evaluation, weights, progress, busy);
    files.maybeSave([&] { return learner.weights(); }, p);
  }
  actors.drain();  // what is still in flight ends before the runtime does
  evaluation.drain();
  if (lastPriorities) lastPriorities->get(std::chrono::seconds(30));
  const RlProgress last = progress.finish();
  files.finish(learner.weights(), last);
  return last;
}

}  // namespace gyre::rl
