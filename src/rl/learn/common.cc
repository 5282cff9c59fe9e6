#include "rl/learn/common.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "gyre/rl/env.h"

namespace gyre::rl {

using Clock = std::chrono::steady_clock;

void refreshWeights(::torch::nn::Sequential& net, std::int64_t& held, const WeightsRef& weights,
                    std::int64_t version) {
  if (version == held) return;
  loadWeights(*net, rt::get(weights));
  held = version;
}

std::uint64_t firstEpisodeSeed(std::uint64_t seed, int index) {
  return (seed << 20) + static_cast<std::uint64_t>(index) * 100003 + (rt::wasRestarted() ? 50021 : 0);
}

std::uint64_t newInstanceId() {
  return (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}

EnvShape seedAndProbe(const RlOptions& o) {
  ::torch::manual_seed(o.seed);
  const std::unique_ptr<Env> probe = makeEnv(o.env);
  return {probe->observationSize(), probe->actions()};
}

rt::ActorOptions rolloutPlacement(const rt::Runtime& rt, int i, const RlOptions& o) {
  rt::ActorOptions a;
  a.rank = rt.size() > 1 ? 1 + i % (rt.size() - 1) : rt.rank();
  a.maxRestarts = o.actorRestarts;
  return a;
}

// Greedy episodes with the latest weights: the return of the policy being learned.
class Evaluator {
 public:
  Evaluator(std::string env, std::uint64_t seed, int hidden, int outputs)
      : env_(makeEnv(env)), seed_(seed), net_(makeMlp(env_->observationSize(), outputs, hidden)) {}
  double episode(WeightsRef weights, std::int64_t version) {
    refreshWeights(net_, version_, weights, version);
    std::vector<float> observation = env_->reset(seed_++);
    double total = 0;
    for (;;) {
      Step step = env_->step(greedyAction(net_, observation, env_->actions()));
      total += step.reward;
      if (step.terminated || step.truncated) return total;
      observation = std::move(step.observation);
    }
  }

 private:
  std::unique_ptr<Env> env_;
  std::uint64_t seed_;
  ::torch::nn::Sequential net_;
  std::int64_t version_ = -1;
};

GYRE_RT_ACTOR(Evaluator, std::string, std::uint64_t, int, int);
GYRE_RT_METHOD(Evaluator, episode);

Evaluation::Evaluation(rt::Runtime& rt, const RlOptions& o, int outputs)
    : interval_(static_cast<std::int64_t>(o.evalInterval * 1000)) {
  rt::ActorOptions here;
  here.rank = rt.rank();
  evaluator_.emplace(rt.actorWith<Evaluator>(here, o.env, o.seed + 99991, o.hidden, outputs));
}

void Evaluation::start(const Publisher& weights) {
  if (running_ || Clock::now() - last_ < interval_) return;
  last_ = Clock::now();
  running_ = evaluator_->call(&Evaluator::episode, weights.latest(), weights.version());
}

double Evaluation::finished() {
  if (!running_ || !running_->isCompleted()) return -std::numeric_limits<double>::infinity();
  const double r = running_->get();
  running_.reset();
  return r;
}

void Evaluation::drain() {
  if (running_) running_->get(std::chrono::seconds(30));
  running_.reset();
}

void endOfTurn(Evaluation& evaluation, const Publisher& weights, Progress& progress, bool busy) {
  evaluation.start(weights);
  progress.evalReturn(evaluation.finished());
  progress.maybeReport();
  if (!busy) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

namespace {

double mean(const std::deque<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void keep100(std::deque<double>& v, double x) {
  v.push_back(x);
  if (v.size() > 100) v.pop_front();
}

}  // namespace

Progress::Progress(const RlOptions& o, std::function<void(const RlProgress&)> report)
    : o_(o), report_(std::move(report)), start_(Clock::now()), lastReport_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::actorReturns(const std::vector<double>& returns) {
  for (double r : returns) keep100(actorReturns_, r);
  p_.episodes += static_cast<std::int64_t>(returns.size());
}

void Progress::evalReturn(double r) {
  if (!std::isfinite(r)) return;
  keep100(evalReturns_, r);
  ++p_.evalEpisodes;
  if (!p_.solved && evalReturns_.size() == 100 && mean(evalReturns_) >= o_.targetReturn) {
    p_.solved = true;
    p_.solvedAtS = seconds();
  }
}

void Progress::actorInstance(std::size_t i, std::uint64_t instance) {
  if (instances_.size() <= i) instances_.resize(i + 1, 0);
  if (instances_[i] != 0 && instances_[i] != instance) {
    ++p_.actorsRestarted;
    std::fprintf(stderr, "gyre rl: rollout actor %zu was rebuilt (its process was lost) and goes on\n", i);
  }
  instances_[i] = instance;
}

void Progress::actorCallLost(std::size_t i, const std::string& why) {
  std::fprintf(stderr,
               "gyre rl: a call to rollout actor %zu was lost (%s); the actor is rebuilt at its next call\n",
               i, why.c_str());
}

bool Progress::over() const {
  return p_.solved || seconds() >= o_.timeLimitS || (o_.maxEnvSteps > 0 && p_.envSteps >= o_.maxEnvSteps);
}

void Progress::emit() {
  p_.seconds = seconds();
  const double dt = std::max(1e-9, p_.seconds - previous_.seconds);
  p_.envStepsPerS = static_cast<double>(p_.envSteps - previous_.envSteps) / dt;
  p_.updatesPerS = static_cast<double>(p_.updates - previous_.updates) / dt;
  p_.actorReturn100 = mean(actorReturns_);
  p_.evalReturn100 = mean(evalReturns_);
  report_(p_);
  previous_ = p_;
}

void Progress::maybeReport() {
  if (std::chrono::duration<double>(Clock::now() - lastReport_).count() < o_.reportEvery) return;
  lastReport_ = Clock::now();
  emit();
}

RlProgress Progress::finish() {
  emit();
  return p_;
}

}  // namespace gyre::rl
