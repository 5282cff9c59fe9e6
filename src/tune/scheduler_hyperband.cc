// HyperBand (Li, Jamieson, DeSalvo, Rostamizadeh, Talwalkar, "Hyperband: A Novel Bandit-Based
// Approach to Hyperparameter Optimization", JMLR 2018), as Ray Tune's HyperBandScheduler runs it.
//
// With s_max = floor(log_eta(max_t)), bracket s (s_max down to 0) holds
// n_s = ceil((s_max + 1) / (s + 1) x eta^s) trials that start with r_s = max_t x eta^-s
// iterations; its rungs are r_s x eta^i, i = 0 .. s (the last is max_t). Inside a bracket,
// successive halving is synchronous: a trial pauses at each rung, and when every trial of the
// rung got there the top floor(n / eta) (at least one) go on while the others stop. Trials join
// brackets in creation order, s_max first; after the last bracket a new round starts. A bracket
// that the searcher cannot fill (no more configurations) runs with the trials it has.
// max_t 9, eta 3: brackets of 9 trials from 1 iteration (rungs 1, 3, 9), 5 from 3 (3, 9), 3 at 9.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/numbers.h"
#include "tune/schedulers.h"

namespace gyre::tune {
namespace {

struct Bracket {
  int s = 0;
  int size = 0;            // n_s
  int offset = 0;          // its first trial's position in a round
  std::vector<int> rungs;  // ascending, the last is max_t
};

class HyperBand final : public Scheduler {
 public:
  explicit HyperBand(const SchedulerOptions& o) : Scheduler(o) {
    const int sMax = static_cast<int>(std::floor(std::log(o.maxT) / std::log(o.eta) + 1e-9));
    for (int s = sMax; s >= 0; --s) {
      Bracket b;
      b.s = s;
      b.size = static_cast<int>(std::ceil((sMax + 1.0) / (s + 1.0) * std::pow(o.eta, s) - 1e-9));
      b.offset = round_;
      int last = 0;
      for (int i = 0; i <= s; ++i) {
        const int r =
            std::min(o.maxT, std::max(1, static_cast<int>(std::lround(o.maxT * std::pow(o.eta, i - s)))));
        if (r > last) b.rungs.push_back(r);
        last = std::max(last, r);
      }
      if (last != o.maxT) b.rungs.push_back(o.maxT);
      round_ += b.size;
      brackets_.push_back(b);
    }
  }

  std::string describe() const override {
    std::string s = fmt::format("hyperband (eta {}; brackets", numbers::format(o_.eta));
    for (const Bracket& b : brackets_) s += fmt::format(" {} from {}", b.size, b.rungs.front());
    return s + ")";
  }

  int stopAt(const Context&, const Trial& t) const override {
    for (int r : bracketOf(t.id).rungs)
      if (r > t.iteration()) return r;
    return o_.maxT;
  }

  Decision onRunEnd(const Context&, const Trial&) const override { return {Verdict::kPause, {}}; }

  Plan next(const Context& c) const override {
    Plan plan;
    const int created = static_cast<int>(c.trials.size());
    for (int first = 0; first < created; first += round_) {
      for (const Bracket& b : brackets_) {
        const int begin = first + b.offset;
        const int end = std::min(begin + b.size, created);
        if (begin >= created) break;
        if (end < begin + b.size && c.moreToCome) continue;  // still filling
        halve(c, b, begin, end, plan);
      }
    }
    if (!plan.stop.empty() || plan.resume >= 0) plan.allowNew = plan.resume < 0;
    return plan;
  }

 private:
  const Bracket& bracketOf(int id) const {
    const int pos = id % round_;
    for (const Bracket& b : brackets_)
      if (pos < b.offset + b.size) return b;
    return brackets_.back();
  }

  // Successive halving over trials [begin, end) of bracket b: what stops, what resumes.
  void halve(const Context& c, const Bracket& b, int begin, int end, Plan& plan) const {
    std::vector<const Trial*> alive;
    for (int id = begin; id < end; ++id) alive.push_back(&c.trials[static_cast<std::size_t>(id)]);
    for (std::size_t i = 0; i + 1 < b.rungs.size(); ++i) {
      const int rung = b.rungs[i];
      std::vector<std::pair<double, const Trial*>> reached;
      for (const Trial* t : alive) {
        if (const Result* r = firstAtOrAfter(*t, rung)) {
          reached.emplace_back(score(r->metric, c.sign), t);
        } else if (!t->finished()) {
          // Not at this rung yet: the rung waits for it.
          if (t->status == TrialStatus::kPaused && plan.resume < 0) plan.resume = t->id;
          return;
        }
      }
      std::stable_sort(reached.begin(), reached.end(),
                       [](const auto& x, const auto& y) { return x.first > y.first; });
      const std::size_t keep = std::max<std::size_t>(
          1, static_cast<std::size_t>(std::floor(static_cast<double>(reached.size()) / o_.eta)));
      alive.clear();
      for (std::size_t k = 0; k < reached.size(); ++k) {
        const Trial* t = reached[k].second;
        if (k < keep) {
          alive.push_back(t);
          if (t->status == TrialStatus::kPaused && t->iteration() < b.rungs[i + 1] && plan.resume < 0)
            plan.resume = t->id;
        } else if (t->status == TrialStatus::kPaused && t->iteration() < b.rungs[i + 1]) {
          plan.stop.push_back(t->id);
        }
      }
    }
  }

  std::vector<Bracket> brackets_;
  int round_ = 0;  // trials in one round of brackets
};

}  // namespace

std::unique_ptr<Scheduler> makeHyperBand(const SchedulerOptions& o) {
  return std::make_unique<HyperBand>(o);
}

}  // namespace gyre::tune
