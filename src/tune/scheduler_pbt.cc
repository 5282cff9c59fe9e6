// Population Based Training (Jaderberg et al., "Population Based Training of Neural Networks",
// 2017), asynchronous as Ray Tune's PopulationBasedTraining.
//
// Every trial's run ends at the next multiple of --perturbation-interval and the trial pauses.
// Ranking every trial with a result by its latest one, the bottom ceil(q x n) (at most n/2) are
// exploited: such a trial takes the checkpoint of a trial drawn from the top ceil(q x n) and that
// trial's configuration, explored: each mutated parameter is resampled from its distribution with
// --resample-probability, else multiplied by 0.8 or 1.2 (integers rounded and moved by at least
// one, quniform values back on their grid) or, for a choice or grid, moved to the next value up or
// down. Paused trials resume least advanced first, after any trial not started yet, so a
// population larger than the slots advances together. The random draws are a function of
// (seed, trial, iteration): a resumed experiment draws the same.
#include <algorithm>
#include <cmath>

#include "common/numbers.h"
#include "tune/schedulers.h"

namespace gyre::tune {
namespace {

Json explore(const Json& config, const Space& space, const SchedulerOptions& o, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Json next = config;
  for (const Param& p : space.params) {
    if (!o.mutations.empty() &&
        std::find(o.mutations.begin(), o.mutations.end(), p.name) == o.mutations.end())
      continue;
    const Json& value = config.contains(p.name) ? config.at(p.name) : Json();
    if (unit(rng) < o.resampleProbability || value.is_null()) {
      next[p.name] = sample(p, rng);
      continue;
    }
    const bool up = unit(rng) < 0.5;
    if (p.distribution == Distribution::kChoice || p.distribution == Distribution::kGrid) {
      const auto it = std::find(p.values.begin(), p.values.end(), value);
      if (it == p.values.end()) {
        next[p.name] = sample(p, rng);
        continue;
      }
      const auto i = static_cast<std::size_t>(it - p.values.begin());
      next[p.name] = p.values[up ? std::min(i + 1, p.values.size() - 1) : (i == 0 ? 0 : i - 1)];
      continue;
    }
    if (!value.is_number()) continue;
    // Kept inside the parameter's range, so every value is one the space could have drawn.
    const double hi = p.distribution == Distribution::kRandInt ? p.high - 1 : p.high;
    const double v = std::clamp(value.get<double>() * (up ? 1.2 : 0.8), p.low, hi);
    if (p.distribution == Distribution::kRandInt || value.is_number_integer()) {
      auto n = static_cast<std::int64_t>(std::llround(v));
      if (n == value.get<std::int64_t>()) n += up ? 1 : -1;
      next[p.name] = std::clamp<std::int64_t>(n, static_cast<std::int64_t>(std::ceil(p.low)),
                                              static_cast<std::int64_t>(std::floor(hi)));
    } else if (p.distribution == Distribution::kQUniform) {
      next[p.name] = std::clamp(std::round(v / p.q) * p.q, p.low, hi);
    } else {
      next[p.name] = v;
    }
  }
  return next;
}

class Pbt final : public Scheduler {
 public:
  Pbt(const SchedulerOptions& o, const Space& space) : Scheduler(o), space_(space) {}

  std::string describe() const override {
    std::string mutated;
    for (const Param& p : space_.params)
      if (o_.mutations.empty() ||
          std::find(o_.mutations.begin(), o_.mutations.end(), p.name) != o_.mutations.end())
        mutated += (mutated.empty() ? "" : ",") + p.name;
    return "pbt (every " + std::to_string(o_.perturbationInterval) + " iteration" +
           (o_.perturbationInterval == 1 ? "" : "s") + ", quantile " + numbers::format(o_.quantile) +
           ", mutating " + mutated + ")";
  }

  int stopAt(const Context&, const Trial& t) const override {
    // After an exploitation the trial goes on from its source's checkpoint, which may be ahead.
    const int interval = o_.perturbationInterval;
    return std::min(o_.maxT, (std::max(t.iteration(), t.checkpointAt) / interval + 1) * interval);
  }

  Decision onRunEnd(const Context& c, const Trial& t) const override {
    std::vector<std::pair<double, int>> ranked;  // (latest score, trial)
    for (const Trial& x : c.trials)
      if (!x.results.empty() && x.status != TrialStatus::kError)
        ranked.emplace_back(score(x.last(), c.sign), x.id);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    auto n = static_cast<std::size_t>(std::ceil(static_cast<double>(ranked.size()) * o_.quantile));
    n = std::min(n, ranked.size() / 2);
    Decision d{Verdict::kPause, {}};
    bool bottom = false;
    for (std::size_t i = 0; i < n; ++i) bottom |= ranked[i].second == t.id;
    if (!bottom) return d;
    std::vector<int> sources;
    // A source is paused at an interval's end: its checkpoint (and the copy taken of it when its
    // run ended) is what its last result measured, and it has iterations left to train.
    for (std::size_t i = ranked.size() - n; i < ranked.size(); ++i) {
      const Trial& s = c.trials[static_cast<std::size_t>(ranked[i].second)];
      if (s.status == TrialStatus::kPaused && s.checkpointAt >= t.iteration() && s.checkpointAt < o_.maxT)
        sources.push_back(s.id);
    }
    if (sources.empty()) return d;
    std::seed_seq seq{static_cast<std::uint32_t>(o_.seed), static_cast<std::uint32_t>(o_.seed >> 32),
                      static_cast<std::uint32_t>(t.id), static_cast<std::uint32_t>(t.iteration())};
    std::mt19937_64 rng(seq);
    std::uniform_int_distribution<std::size_t> pick(0, sources.size() - 1);
    const Trial& source = c.trials[static_cast<std::size_t>(sources[pick(rng)])];
    d.exploit = Exploit{t.iteration(), source.id, explore(source.config, space_, o_, rng)};
    return d;
  }

  Plan next(const Context& c) const override {
    Plan plan;
    plan.newFirst = true;
    for (const Trial& t : c.trials)
      if (t.status == TrialStatus::kPaused &&
          (plan.resume < 0 || t.iteration() < c.trials[static_cast<std::size_t>(plan.resume)].iteration()))
        plan.resume = t.id;
    return plan;
  }

 private:
  const Space& space_;
};

}  // namespace

std::unique_ptr<Scheduler> makePbt(const SchedulerOptions& o, const Space& space) {
  return std::make_unique<Pbt>(o, space);
}

}  // namespace gyre::tune
