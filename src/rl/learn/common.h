// What gyre::rl's learners share: weights published as gyre::rt objects, where the rollout actors
// live, the greedy evaluator, and the progress the learner reports (live line, metrics.jsonl).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gyre/rt.h"
#include "rl/cli/options.h"
#include "rl/learn/learners.h"
#include "rl/learn/nets.h"

namespace gyre::rl {

using Weights = std::vector<float>;
using WeightsRef = rt::ObjectRef<Weights>;

// The learner's weights as objects: publish() puts a new version; the last few stay readable, so
// that a call issued with an older one (its actor fetches it when its version changed) still finds it.
class Publisher {
 public:
  Publisher(rt::Runtime& rt, Weights first) : rt_(&rt) { refs_.push_back(rt.put(first)); }
  void publish(const Weights& w) {
    refs_.push_back(rt_->put(w));
    ++version_;
    if (refs_.size() > 8) refs_.pop_front();
  }
  const WeightsRef& latest() const { return refs_.back(); }
  std::int64_t version() const { return version_; }

 private:
  rt::Runtime* rt_;
  std::deque<WeightsRef> refs_;
  std::int64_t version_ = 0;
};

// In an actor: loads the learner's weights into `net` unless it holds that version already
// (`held`), so that the object is fetched once per version.
void refreshWeights(::torch::nn::Sequential& net, std::int64_t& held, const WeightsRef& weights,
                    std::int64_t version);

// A rollout actor's first episode seed: its own per index, and others after a rebuild.
std::uint64_t firstEpisodeSeed(std::uint64_t seed, int index);

// A number drawn per actor instance: a new one in an answer says the actor was rebuilt.
std::uint64_t newInstanceId();

// Rollout actor i: on process 1 + i mod the others (the learner is rank 0), or here when alone;
// rebuilt on a live process up to --actor-restarts times when its process is lost.
rt::ActorOptions rolloutPlacement(const rt::Runtime& rt, int i, const RlOptions& o);

class Evaluator;

// A handle on the greedy evaluator, an actor in the learner's process: one episode with the
// newest weights of a network of `outputs` outputs, acting by the argmax of the first actions.
class Evaluation {
 public:
  Evaluation(rt::Runtime& rt, const RlOptions& o, int outputs);
  // Starts an episode with these weights unless one is running or the last started less than
  // --eval-interval ago.
  void start(const Publisher& weights);
  // The return of the episode that ended since the last call, or -inf.
  double finished();
  void drain();

 private:
  std::optional<rt::ActorHandle<Evaluator>> evaluator_;
  std::optional<rt::Future<double>> running_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
};

// The learner's running record: env steps, updates, returns, the live reports and when it ends.
class Progress {
 public:
  Progress(const RlOptions& o, std::function<void(const RlProgress&)> report);
  RlProgress& now() { return p_; }
  void actorReturns(const std::vector<double>& returns);
  void evalReturn(double r);  // marks the run solved when 100 greedy episodes average the target
  // Rollout actor i answered from `instance` (a number its constructor drew): a new one means it
  // was rebuilt after its process was lost, which is counted and said.
  void actorInstance(std::size_t i, std::uint64_t instance);
  // A call to rollout actor i failed with its process (ActorDiedError): said; the next call rebuilds it.
  void actorCallLost(std::size_t i, const std::string& why);
  bool over() const;   // solved, or past the time or env-step limit
  void maybeReport();  // every --report-every seconds
  RlProgress finish();

 private:
  double seconds() const;
  void emit();

  const RlOptions& o_;
  std::function<void(const RlProgress&)> report_;
  RlProgress p_, previous_;
  std::deque<double> actorReturns_, evalReturns_;
  std::vector<std::uint64_t> instances_;
  std::chrono::steady_clock::time_point start_, lastReport_;
};

// The end of one turn of a learner's loop: a greedy episode started (when due) and a finished
// one's return taken, the live report (when due), and a short sleep when the turn did nothing.
void endOfTurn(Evaluation& evaluation, const Publisher& weights, Progress& progress, bool busy);

// The probe of the environment a learner starts with (torch seeded with --seed first): the sizes
// of its observations and of its action set.
struct EnvShape {
  int observations = 0;
  int actions = 0;
};
EnvShape seedAndProbe(const RlOptions& o);

// The rollout actors and their calls in flight, each call `stepsPerCall` env steps. poll() is a
// turn over them: a finished call's result is told to Progress (its instance and episode returns)
// and handed to `take`, which returns its env steps; a call lost with its process is counted;
// then each idle actor gets `issue(actor)` while `mayIssue()` allows. Result has `instance` and
// `episodeReturns`.
template <class Actor, class Result>
class RolloutActors {
 public:
  RolloutActors(std::vector<rt::ActorHandle<Actor>> actors, std::int64_t stepsPerCall)
      : actors_(std::move(actors)), inflight_(actors_.size()), stepsPerCall_(stepsPerCall) {}

  // Env steps of the calls in flight.
  std::int64_t issuedSteps() const { return issuedSteps_; }

  // Returns whether a call finished.
  template <class Take, class MayIssue, class Issue>
  bool poll(Progress& progress, Take&& take, MayIssue&& mayIssue, Issue&& issue) {
    bool finished = false;
    for (std::size_t i = 0; i < actors_.size(); ++i) {
      if (inflight_[i] && inflight_[i]->isCompleted()) {
        finished = true;
        try {
          Result r = inflight_[i]->get();
          progress.actorInstance(i, r.instance);
          progress.actorReturns(r.episodeReturns);
          progress.now().envSteps += take(std::move(r));
        } catch (const rt::ActorDiedError& e) {
          progress.actorCallLost(i, e.what());
        }
        issuedSteps_ -= stepsPerCall_;
        inflight_[i].reset();
      }
      if (!inflight_[i] && mayIssue()) {
        inflight_[i] = issue(actors_[i]);
        issuedSteps_ += stepsPerCall_;
      }
    }
    return finished;
  }

  // Before the runtime ends: waits (30 s at most each) for the calls still in flight, whatever
  // their outcome.
  void drain() {
    for (auto& f : inflight_)
      if (f) {
        try {
          f->get(std::chrono::seconds(30));
        } catch (const std::exception&) {
        }
      }
  }

 private:
  std::vector<rt::ActorHandle<Actor>> actors_;
  std::vector<std::optional<rt::Future<Result>>> inflight_;
  std::int64_t stepsPerCall_;
  std::int64_t issuedSteps_ = 0;
};

}  // namespace gyre::rl
