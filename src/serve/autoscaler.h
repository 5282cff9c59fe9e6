// gyre serve's autoscaling (--min-replicas, --max-replicas), Ray Serve's policy: the replicas
// wanted for the requests in flight (queued, or in a batch being computed) are
// ceil(ongoing / --target-ongoing-requests), kept within [min, max]; the count goes up once more
// have been wanted for --upscale-delay, and down once fewer have been wanted for
// --downscale-delay (to the most wanted over that time, so a dip does not shed replicas a burst
// needs). Pure: time is given, so the tests replay any load.
#pragma once

#include <chrono>
#include <optional>

namespace gyre::serve {

struct AutoscaleOptions {
  int minReplicas = 1;
  int maxReplicas = 1;
  double targetOngoing = 2;  // requests in flight per replica
  std::chrono::milliseconds upscaleDelay{1000};
  std::chrono::milliseconds downscaleDelay{10000};
};

class AutoscalePolicy {
 public:
  using Clock = std::chrono::steady_clock;
  // Throws InvalidArgument for 1 <= min <= max not holding, or a target that is not positive.
  explicit AutoscalePolicy(AutoscaleOptions options);

  // The replicas wanted for `ongoing` requests in flight, within [min, max].
  int wanted(double ongoing) const;
  // Observes `ongoing` at `now` with `current` replicas; the count to have from now on.
  int decide(Clock::time_point now, double ongoing, int current);

 private:
  AutoscaleOptions o_;
  std::optional<Clock::time_point> moreSince_;  // since when more replicas than current are wanted
  std::optional<Clock::time_point> fewerSince_;
  int mostWanted_ = 0;  // the most wanted while fewer were
};

}  // namespace gyre::serve
