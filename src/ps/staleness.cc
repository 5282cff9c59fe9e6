#include <algorithm>
#include <cmath>

#include "gyre/ps.h"

namespace gyre::ps {

StalenessSummary summarizeStaleness(const std::vector<std::uint64_t>& histogram) {
  constexpr auto kLast = static_cast<std::size_t>(WorkerStats::kMaxStaleness);
  StalenessSummary s;
  double sum = 0;
  for (std::size_t k = 0; k < histogram.size(); ++k) {
    s.updates += histogram[k];
    sum += static_cast<double>(k) * static_cast<double>(histogram[k]);
    if (histogram[k] > 0) s.max = static_cast<int>(k);
  }
  if (s.updates == 0) return s;
  s.mean = sum / static_cast<double>(s.updates);
  s.saturated = histogram.size() > kLast && histogram[kLast] > 0;
  auto percentile = [&](double p) {
    const auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(s.updates)));
    std::uint64_t seen = 0;
    for (std::size_t k = 0; k < histogram.size(); ++k) {
      seen += histogram[k];
      if (seen >= std::max<std::uint64_t>(rank, 1)) return static_cast<int>(k);
    }
    return s.max;
  };
  s.p50 = percentile(0.50);
  s.p99 = percentile(0.99);
  return s;
}

}  // namespace gyre::ps
