#include "rl/learn/unroll_actor.h"

#include "rl/learn/policy_files.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <iterator>
#include <optional>

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

UnrollBatch stackUnrolls(std::vector<Trajectory>& batch) {
  const auto t = static_cast<long>(batch.front().taken.size());
  const long dim = batch.front().observationSize;
  const long actions = batch.front().actions;
  auto stack = [&](auto member, std::vector<long> shape, ::torch::ScalarType type) {
    std::vector<::torch::Tensor> parts;
    for (Trajectory& tr : batch) parts.push_back(::torch::from_blob((tr.*member).data(), shape, type));
    return ::torch::stack(parts);
  };
  UnrollBatch b;
  b.observations = stack(&Trajectory::observations, {t + 1, dim}, ::torch::kFloat32);
  b.taken = stack(&Trajectory::taken, {t}, ::torch::kInt32).to(::torch::kLong);
  b.rewards = stack(&Trajectory::rewards, {t}, ::torch::kFloat32);
  b.dones = stack(&Trajectory::dones, {t}, ::torch::kFloat32);
  b.behaviour = stack(&Trajectory::logits, {t, actions}, ::torch::kFloat32);
  return b;
}

RlProgress runUnrollLearner(rt::Runtime& rt, const RlOptions& o, const EnvShape& env, const UnrollLearner& learner,
                            const std::function<void(const RlProgress&)>& report) {
  PolicyFiles files(o, env, env.actions + 1);
  if (const std::optional<Weights> w = files.resumed()) learner.load(*w);
  Evaluation evaluation(rt, o, env.actions + 1);
  Publisher weights(rt, learner.weights());
  const int unroll = unrollOf(o);
  const auto batchSize = static_cast<std::size_t>(trajectoriesOf(o));
  std::vector<rt::ActorHandle<PolicyActor>> handles;
  for (int i = 0; i < o.actors; ++i)
    handles.push_back(rt.actorWith<PolicyActor>(rolloutPlacement(rt, i, o), o.env, i, o.seed, o.hidden));
  RolloutActors<PolicyActor, Trajectory> actors(std::move(handles), unroll);
  std::deque<Trajectory> queue;  // unrolls waiting for the learner

  Progress progress(o, report);
  RlProgress& p = progress.now();
  auto enqueue = [&](Trajectory tr) {
    const auto steps = static_cast<std::int64_t>(tr.taken.size());
    queue.push_back(std::move(tr));
    return steps;
  };
  auto mayIssue = [&] {
    const std::size_t ahead =
        learner.onPolicy ? queue.size() + static_cast<std::size_t>(actors.issuedSteps() / unroll) : queue.size();
    return ahead < (learner.onPolicy ? 1 : 2) * batchSize &&
           (o.maxEnvSteps <= 0 || p.envSteps + actors.issuedSteps() < o.maxEnvSteps);
  };
  auto call = [&](rt::ActorHandle<PolicyActor>& actor) {
    return actor.call(&PolicyActor::unroll, weights.latest(), weights.version(), unroll);
  };
  while (!progress.over()) {
    bool busy = actors.poll(progress, enqueue, mayIssue, call);
    if (queue.size() >= batchSize) {
      busy = true;
      std::vector<Trajectory> batch(std::make_move_iterator(queue.begin()),
                                    std::make_move_iterator(queue.begin() + static_cast<long>(batchSize)));
      queue.erase(queue.begin(), queue.begin() + static_cast<long>(batchSize));
      learner.update(batch);
      ++p.updates;
      weights.publish(learner.weights());  // the actors unroll the newest policy
    }
    endOfTurn(evaluation, weights, progress, busy);
    files.maybeSave(learner.weights, p);
  }
  actors.drain();
  evaluation.drain();
  const RlProgress last = progress.finish();
  files.finish(learner.weights(), last);
  return last;
}

}  // namespace gyre::rl

GYRE_RT_ACTOR(gyre::rl::PolicyActor, std::string, int, std::uint64_t, int);
GYRE_RT_METHOD(gyre::rl::PolicyActor, unroll);
