#include "launcher/run_metrics.h"

#include "metrics/exposition.h"

namespace gyre::launcher {

RunMetrics& RunMetrics::get() {
  static RunMetrics m;
  return m;
}

void RunMetrics::generationStarted(int generation) {
  if (generation > 0) ++restarts_;
  generation_ = static_cast<std::uint64_t>(generation);
}

void RunMetrics::workerExited(bool failed) {
  --running_;
  ++(failed ? exitsFailed_ : exitsOk_);
}

void RunMetrics::membership(std::uint64_t number, int size) {
  generation_ = number;
  membershipSize_ = size;
}

std::string RunMetrics::render() const {
  using metrics::Family;
  std::vector<Family> f;
  f.push_back(Family{"gyre_run_workers", "Workers of the job running now", "gauge", {}}.add(
      std::max(0, running_.load())));
  Family exits{"gyre_run_worker_exits_total",
               "Workers that exited, ok or failed (a non-zero code or a signal)",
               "counter",
               {}};
  exits.add(static_cast<double>(exitsOk_.load()), {{"outcome", "ok"}})
      .add(static_cast<double>(exitsFailed_.load()), {{"outcome", "failed"}});
  f.push_back(std::move(exits));
  f.push_back(Family{
      "gyre_run_generation",
      "The job's generation (--max-restarts) or, elastic, its membership",
      "gauge",
      {}}.add(static_cast<double>(generation_.load())));
  f.push_back(Family{
      "gyre_run_restarts_total",
      "Generations started again, or, elastic, workers started after the first ones (replacements and "
      "additions)",
      "counter",
      {}}.add(static_cast<double>(restarts_.load())));
  if (membershipSize_ >= 0)
    f.push_back(
        Family{"gyre_run_membership_size", "Elastic: the workers of the newest membership", "gauge", {}}.add(
            membershipSize_.load()));
  return metrics::render(f);
}

}  // namespace gyre::launcher
