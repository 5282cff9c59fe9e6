#include "serve/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gyre/errors.h"

namespace gyre::serve {

AutoscalePolicy::AutoscalePolicy(AutoscaleOptions options) : o_(options) {
  if (o_.minReplicas < 1 || o_.maxReplicas < o_.minReplicas)
    throw InvalidArgument("autoscaling needs 1 <= --min-replicas <= --max-replicas, not " +
                          std::to_string(o_.minReplicas) + " and " + std::to_string(o_.maxReplicas));
  if (!(o_.targetOngoing > 0)) throw InvalidArgument("--target-ongoing-requests must be positive");
}

int AutoscalePolicy::wanted(double ongoing) const {
  const double n = std::ceil(std::max(0.0, ongoing) / o_.targetOngoing);
  return static_cast<int>(std::clamp(n, static_cast<double>(o_.minReplicas), static_cast<double>(o_.maxReplicas)));
}

int AutoscalePolicy::decide(Clock::time_point now, double ongoing, int current) {
  const int want = wanted(ongoing);
  if (want > current) {
    fewerSince_.reset();
    if (!moreSince_) moreSince_ = now;
    if (now - *moreSince_ < o_.upscaleDelay) return current;
    moreSince_.reset();
    return want;
  }
  moreSince_.reset();
  if (want == current) {
    fewerSince_.reset();
    return current;
  }
  if (!fewerSince_) {
    fewerSince_ = now;
    mostWanted_ = want;
  }
  mostWanted_ = std::max(mostWanted_, want);
  if (now - *fewerSince_ < o_.downscaleDelay) return current;
  fewerSince_.reset();
  return mostWanted_;
}

}  // namespace gyre::serve
