// The schedulers' common part: defaults (FIFO), the factory and its checks.
#include "tune/scheduler.h"

#include <algorithm>
#include <cmath>

#include "common/numbers.h"
#include "gyre/errors.h"
#include "tune/schedulers.h"

namespace gyre::tune {

int Scheduler::stopAt(const Context&, const Trial&) const {
  return o_.maxT;
}

Verdict Scheduler::onResult(const Context&, const Trial&, const Result&) const {
  return Verdict::kContinue;
}

Decision Scheduler::onRunEnd(const Context&, const Trial&) const {
  return {};
}

Plan Scheduler::next(const Context&) const {
  return {};
}

namespace {

class Fifo final : public Scheduler {
 public:
  using Scheduler::Scheduler;
  std::string describe() const override {
    return "fifo (every trial trains " + std::to_string(o_.maxT) + " iterations)";
  }
};

}  // namespace

std::vector<int> ashaRungs(int grace, double eta, int maxT) {
  std::vector<int> rungs;
  for (double r = grace; r < maxT; r *= eta) {
    const int rung = static_cast<int>(std::lround(r));
    if (rungs.empty() || rung > rungs.back()) rungs.push_back(rung);
  }
  return rungs;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double pos = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0 || values[lo] == values[hi]) return values[lo];
  // A trial without the metric scores -inf: no interpolation across it.
  if (!std::isfinite(values[lo]) || !std::isfinite(values[hi])) return frac < 0.5 ? values[lo] : values[hi];
  return values[lo] + (values[hi] - values[lo]) * frac;
}

std::unique_ptr<Scheduler> makeScheduler(const SchedulerOptions& o, const Space& space) {
  numbers::checkInt("--max-t", o.maxT, 1, 1000000);
  numbers::checkInt("--grace-period", o.gracePeriod, 1, o.maxT, "at most --max-t");
  numbers::check("--eta", o.eta, {1, 1000, true});
  numbers::checkInt("--min-samples", o.minSamples, 1, 1000000);
  numbers::checkInt("--perturbation-interval", o.perturbationInterval, 1, o.maxT, "at most --max-t");
  numbers::check("--quantile", o.quantile, {0, 0.5, true});
  numbers::check("--resample-probability", o.resampleProbability, {0, 1});
  if (o.name != "pbt" && !o.mutations.empty())
    throw InvalidArgument("--pbt-mutate is for --scheduler pbt, not " + o.name);
  for (const std::string& m : o.mutations)
    if (space.find(m) == nullptr)
      throw InvalidArgument("--pbt-mutate " + m + ": the search space has no parameter " + m);
  if (o.name == "fifo") return std::make_unique<Fifo>(o);
  if (o.name == "asha") return makeAsha(o);
  if (o.name == "asha-stop") return makeAshaStop(o);
  if (o.name == "hyperband") return makeHyperBand(o);
  if (o.name == "median") return makeMedianStopping(o);
  if (o.name == "pbt") return makePbt(o, space);
  throw InvalidArgument("unknown --scheduler " + o.name +
                        " (fifo, asha, asha-stop, hyperband, median or pbt)");
}

}  // namespace gyre::tune
