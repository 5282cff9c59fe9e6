// `gyre bench serve --autoscale-step LOW,HIGH`: one autoscaling server (--min-replicas 1
// --max-replicas N) under a step of load, LOW then HIGH then LOW requests/s, open loop, and its
// replica count read from /metrics meanwhile; the timeline in one-second windows and what the
// targets ask: the higher count and a p99 within 100 ms within 10 s of the step up, and back to
// the lower count within 30 s of the step down. The analysis is pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gyre::app {

struct StepPhase {
  double rate = 0;     // requests/s offered
  double startS = 0;   // from the first phase's start
  double seconds = 0;
  std::vector<double> dueS;         // answered requests: when due, from the first phase's start
  std::vector<double> latenciesMs;  // and their latencies
  int errors = 0;
};

struct ReplicaSample {
  double atS = 0;  // from the first phase's start
  int replicas = 0;
};

struct StepWindow {
  double startS = 0;
  double offered = 0;   // the phase's rate
  int answered = 0;
  double p99Ms = 0;
  int replicas = 0;     // the most seen in the window
};

struct StepVerdict {
  double upReplicasS = -1;  // from the step up until the most replicas were running (-1: never)
  double upP99S = -1;       // from the step up until every later window of the high phase had p99 <= bound
  double downReplicasS = -1;  // from the step down until the fewest replicas were back
  int most = 0, fewest = 0;   // the replica counts aimed at
  int errors = 0;
};

// One-second windows over the three phases.
std::vector<StepWindow> stepWindows(const std::vector<StepPhase>& phases, const std::vector<ReplicaSample>& replicas);
// `phases` are LOW, HIGH, LOW; `most` the --max-replicas, `fewest` the --min-replicas.
StepVerdict stepVerdict(const std::vector<StepPhase>& phases, const std::vector<ReplicaSample>& replicas, int fewest,
                        int most, double p99BoundMs);

std::string stepText(const std::vector<StepWindow>& windows, const StepVerdict& v, double p99BoundMs);
nlohmann::json stepJson(const std::vector<StepWindow>& windows, const StepVerdict& v, double p99BoundMs);

}  // namespace gyre::app
