#include "bench_serve_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench_serve_load.h"

namespace gyre::app {
namespace {

constexpr double kUpTargetS = 10;
constexpr double kDownTargetS = 30;

double endOf(const std::vector<StepPhase>& phases) {
  return phases.empty() ? 0 : phases.back().startS + phases.back().seconds;
}

}  // namespace

std::vector<StepWindow> stepWindows(const std::vector<StepPhase>& phases, const std::vector<ReplicaSample>& replicas) {
  std::vector<StepWindow> windows(static_cast<std::size_t>(std::ceil(endOf(phases))));
  std::vector<std::vector<double>> latencies(windows.size());
  for (std::size_t w = 0; w < windows.size(); ++w) windows[w].startS = static_cast<double>(w);
  for (const StepPhase& p : phases) {
    for (std::size_t w = 0; w < windows.size(); ++w) {  // the phase that holds the window's middle
      const double middle = windows[w].startS + 0.5;
      if (middle >= p.startS && middle < p.startS + p.seconds) windows[w].offered = p.rate;
    }
    for (std::size_t i = 0; i < p.dueS.size(); ++i) {
      const auto w = static_cast<std::size_t>(std::max(0.0, p.dueS[i]));
      if (w >= windows.size()) continue;
      ++windows[w].answered;
      latencies[w].push_back(p.latenciesMs[i]);
    }
  }
  for (std::size_t w = 0; w < windows.size(); ++w) windows[w].p99Ms = percentile(latencies[w], 0.99);
  for (const ReplicaSample& r : replicas) {
    const auto w = static_cast<std::size_t>(std::max(0.0, r.atS));
    if (w < windows.size()) windows[w].replicas = std::max(windows[w].replicas, r.replicas);
  }
  return windows;
}

StepVerdict stepVerdict(const std::vector<StepPhase>& phases, const std::vector<ReplicaSample>& replicas, int fewest,
                        int most, double p99BoundMs) {
  StepVerdict v;
  v.most = most;
  v.fewest = fewest;
  for (const StepPhase& p : phases) v.errors += p.errors;
  if (phases.size() != 3) return v;
  const double up = phases[1].startS;
  const double down = phases[2].startS;
  for (const ReplicaSample& r : replicas)
    if (r.atS >= up && r.atS < down && r.replicas >= most) {
      v.upReplicasS = r.atS - up;
      break;
    }
  for (const ReplicaSample& r : replicas)
    if (r.atS >= down && r.replicas <= fewest) {
      v.downReplicasS = r.atS - down;
      break;
    }
  // The first window of the high phase from which every later one of it kept the bound.
  const std::vector<StepWindow> windows = stepWindows(phases, replicas);
  double settled = -1;
  for (const StepWindow& w : windows) {
    if (w.startS < up - 1e-9 || w.startS >= down - 1e-9) continue;
    const bool ok = w.answered > 0 && w.p99Ms <= p99BoundMs;
    if (!ok) settled = -1;
    else if (settled < 0) settled = w.startS;
  }
  if (settled >= 0) v.upP99S = settled - up;
  return v;
}

std::string stepText(const std::vector<StepWindow>& windows, const StepVerdict& v, double p99BoundMs) {
  std::string out = fmt::format("{:>6} {:>9} {:>9} {:>9} {:>9}\n", "second", "offered", "answered", "p99 ms", "replicas");
  for (const StepWindow& w : windows)
    out += fmt::format("{:>6.0f} {:>9.0f} {:>9} {:>9.1f} {:>9}\n", w.startS, w.offered, w.answered, w.p99Ms,
                       w.replicas > 0 ? std::to_string(w.replicas) : "-");
  const auto when = [](double s) { return s < 0 ? std::string("never") : fmt::format("{:.1f} s", s); };
  const bool up = v.upReplicasS >= 0 && v.upReplicasS <= kUpTargetS && v.upP99S >= 0 && v.upP99S <= kUpTargetS;
  const bool down = v.downReplicasS >= 0 && v.downReplicasS <= kDownTargetS;
  out += fmt::format("targets: after the step up, {} replicas and p99 <= {:.0f} ms within {:.0f} s; after the step down, "
                     "{} replica(s) within {:.0f} s\n",
                     v.most, p99BoundMs, kUpTargetS, v.fewest, kDownTargetS);
  out += fmt::format("  up: {} replicas after {}, p99 within the bound from {}  {}\n", v.most, when(v.upReplicasS),
                     when(v.upP99S), up ? "PASS" : "MISS");
  out += fmt::format("  down: {} replica(s) after {}  {}\n", v.fewest, when(v.downReplicasS), down ? "PASS" : "MISS");
  out += fmt::format("  errors: {}\n", v.errors);
  return out;
}

nlohmann::json stepJson(const std::vector<StepWindow>& windows, const StepVerdict& v, double p99BoundMs) {
  nlohmann::json rows = nlohmann::json::array();
  for (const StepWindow& w : windows)
    rows.push_back({{"second", w.startS}, {"offered", w.offered}, {"answered", w.answered}, {"p99_ms", w.p99Ms},
                    {"replicas", w.replicas}});
  const bool up = v.upReplicasS >= 0 && v.upReplicasS <= kUpTargetS && v.upP99S >= 0 && v.upP99S <= kUpTargetS;
  const bool down = v.downReplicasS >= 0 && v.downReplicasS <= kDownTargetS;
  return {{"windows", rows},
          {"summary",
           {{"p99_bound_ms", p99BoundMs},
            {"up_replicas_s", v.upReplicasS},
            {"up_p99_s", v.upP99S},
            {"down_replicas_s", v.downReplicasS},
            {"errors", v.errors},
            {"up", up ? "pass" : "miss"},
            {"down", down ? "pass" : "miss"}}}};
}

}  // namespace gyre::app
