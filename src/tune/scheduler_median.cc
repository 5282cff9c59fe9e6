// The median stopping rule (Golovin et al., "Google Vizier", KDD 2017), as Ray Tune's
// MedianStoppingRule: at iteration t (from the grace period on) a trial stops when its best
// result so far is worse than the median, over the other trials that reached t, of their running
// means up to t, provided at least --min-samples other trials reached t. It needs no pausing and
// no checkpoints; it saves least when the curves cross late.
#include "tune/schedulers.h"

namespace gyre::tune {
namespace {

class MedianStopping final : public Scheduler {
 public:
  using Scheduler::Scheduler;

  std::string describe() const override {
    return "median (grace " + std::to_string(o_.gracePeriod) + ", min samples " +
           std::to_string(o_.minSamples) + ")";
  }

  Verdict onResult(const Context& c, const Trial& t, const Result& r) const override {
    if (r.iteration < o_.gracePeriod) return Verdict::kContinue;
    std::vector<double> means;
    for (const Trial& other : c.trials) {
      if (other.id == t.id || other.iteration() < r.iteration) continue;
      double sum = 0;
      int n = 0;
      for (const Result& x : other.results) {
        if (x.iteration > r.iteration) break;
        sum += score(x.metric, c.sign);
        ++n;
      }
      if (n > 0) means.push_back(sum / n);
    }
    if (static_cast<int>(means.size()) < o_.minSamples) return Verdict::kContinue;
    return score(t.best(c.sign), c.sign) < percentile(means, 50) ? Verdict::kStop : Verdict::kContinue;
  }
};

}  // namespace

std::unique_ptr<Scheduler> makeMedianStopping(const SchedulerOptions& o) {
  return std::make_unique<MedianStopping>(o);
}

}  // namespace gyre::tune
