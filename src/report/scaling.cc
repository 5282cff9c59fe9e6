#include "report/scaling.h"

#include <algorithm>
#include <map>

namespace gyre::report {

double amdahl(double f, double w) {
  return 1.0 / (f + (1.0 - f) / w);
}

std::optional<Scaling> scaling(const std::vector<std::pair<int, double>>& throughputs) {
  std::map<int, double> best;
  for (const auto& [w, t] : throughputs)
    if (w >= 1 && t > 0) best[w] = std::max(best[w], t);
  if (!best.contains(1)) return std::nullopt;
  Scaling s;
  const double base = best.at(1);
  double xy = 0, xx = 0;
  for (const auto& [w, t] : best) {
    const double speedup = t / base;
    s.points.push_back({w, t, speedup, speedup / w});
    if (w == 1) continue;
    const double x = 1.0 - 1.0 / w, y = 1.0 / speedup - 1.0 / w;
    xy += x * y;
    xx += x * x;
  }
  if (xx > 0) s.serialFraction = std::clamp(xy / xx, 0.0, 1.0);
  return s;
}

}  // namespace gyre::report
