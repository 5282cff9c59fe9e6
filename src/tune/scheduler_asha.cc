// ASHA, asynchronous successive halving (Li et al., MLSys 2020), in its two forms.
//
// Rungs are grace x eta^k iterations below max_t (grace 1, eta 3, max_t 9: rungs 1 and 3, then 9).
//
// asha (promotion, the paper's Algorithm 2): a trial's run ends at the next rung and the trial
// pauses there. A free slot looks from the highest rung down for a paused trial that is among the
// top floor(n / eta) of the n results recorded at its rung so far and is not promoted yet, and
// resumes it to the next rung; only when there is none does a new trial start. No rung waits to
// fill, so no slot idles while a trial could be promoted or started. With n trials and every rung
// full, rung k holds n / eta^k trials: compute n x grace x (1 + (eta - 1)/eta x rungs) iterations
// against n x max_t for grid search (27 trials, eta 3, 1-3-9: 63 against 243).
//
// asha-stop (Ray Tune's AsyncHyperBandScheduler with one bracket): trials run on; when a trial
// first reaches a rung, the rung's cutoff is the (1 - 1/eta) quantile of the results recorded
// there before it, and a trial below the cutoff stops. Early trials always pass (nothing is
// recorded yet), so its compute depends on the order trials arrive.
#include <algorithm>
#include <cmath>

#include "common/numbers.h"
#include "tune/schedulers.h"

namespace gyre::tune {

const Result* firstAtOrAfter(const Trial& t, int iteration) {
  for (const Result& r : t.results)
    if (r.iteration >= iteration) return &r;
  return nullptr;
}

namespace {

std::string rungList(const std::vector<int>& rungs, int maxT) {
  std::string s;
  for (int r : rungs) s += std::to_string(r) + ", ";
  return s + std::to_string(maxT);
}

class AshaPromotion final : public Scheduler {
 public:
  explicit AshaPromotion(const SchedulerOptions& o)
      : Scheduler(o), rungs_(ashaRungs(o.gracePeriod, o.eta, o.maxT)) {}

  std::string describe() const override {
    return "asha (promotion; eta " + numbers::format(o_.eta) + ", rungs " + rungList(rungs_, o_.maxT) + ")";
  }

  int stopAt(const Context&, const Trial& t) const override {
    for (int r : rungs_)
      if (r > t.iteration()) return r;
    return o_.maxT;
  }

  Decision onRunEnd(const Context&, const Trial&) const override { return {Verdict::kPause, {}}; }

  Plan next(const Context& c) const override {
    for (std::size_t k = rungs_.size(); k-- > 0;) {
      const int rung = rungs_[k];
      const int above = k + 1 < rungs_.size() ? rungs_[k + 1] : o_.maxT;
      std::vector<std::pair<double, int>> recorded;  // (score, trial)
      for (const Trial& t : c.trials)
        if (const Result* r = firstAtOrAfter(t, rung)) recorded.emplace_back(score(r->metric, c.sign), t.id);
      // Best first; a tie goes to the earlier trial.
      std::stable_sort(recorded.begin(), recorded.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      const auto top = static_cast<std::size_t>(std::floor(static_cast<double>(recorded.size()) / o_.eta));
      for (std::size_t i = 0; i < top; ++i) {
        const Trial& t = c.trials[static_cast<std::size_t>(recorded[i].second)];
        if (t.status == TrialStatus::kPaused && t.iteration() < above) return {t.id, false, true, {}};
      }
    }
    return {};
  }

 private:
  std::vector<int> rungs_;
};

class AshaStop final : public Scheduler {
 public:
  explicit AshaStop(const SchedulerOptions& o)
      : Scheduler(o), rungs_(ashaRungs(o.gracePeriod, o.eta, o.maxT)) {}

  std::string describe() const override {
    return "asha-stop (eta " + numbers::format(o_.eta) + ", rungs " + rungList(rungs_, o_.maxT) + ")";
  }

  Verdict onResult(const Context& c, const Trial& t, const Result& r) const override {
    for (std::size_t k = rungs_.size(); k-- > 0;) {
      const int rung = rungs_[k];
      if (r.iteration < rung) continue;
      if (firstAtOrAfter(t, rung) != &r) return Verdict::kContinue;  // recorded there already
      std::vector<double> recorded;
      for (const Trial& other : c.trials) {
        if (other.id == t.id) continue;
        const Result* o = firstAtOrAfter(other, rung);
        if (o != nullptr && o->time <= r.time) recorded.push_back(score(o->metric, c.sign));
      }
      if (recorded.empty()) return Verdict::kContinue;
      const double cutoff = percentile(recorded, (1 - 1 / o_.eta) * 100);
      return score(r.metric, c.sign) < cutoff ? Verdict::kStop : Verdict::kContinue;
    }
    return Verdict::kContinue;
  }

 private:
  std::vector<int> rungs_;
};

}  // namespace

std::unique_ptr<Scheduler> makeAsha(const SchedulerOptions& o) {
  return std::make_unique<AshaPromotion>(o);
}

std::unique_ptr<Scheduler> makeAshaStop(const SchedulerOptions& o) {
  return std::make_unique<AshaStop>(o);
}

}  // namespace gyre::tune
