// A trial of a tune experiment: one configuration of the search space, trained in runs. A run is
// one process (a gyre job when the trial asks for np > 1) that resumes from the trial's checkpoint
// and trains up to an iteration the scheduler chose (its stop point), reporting a result each
// iteration; between runs the trial is paused. The schedulers (scheduler.h) decide from these
// records alone, so an experiment resumed from its state file decides as it would have.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tune/space.h"

namespace gyre::tune {

enum class TrialStatus { kPending, kRunning, kPaused, kTerminated, kError };

// "PENDING", "RUNNING", ... as Ray Tune shows them.
const char* statusName(TrialStatus s);
std::optional<TrialStatus> parseStatus(const std::string& name);

struct Result {
  int iteration = 0;             // 1, 2, ...: epochs of gyre train, reports of any other command
  double metric = std::nan("");  // the experiment's metric; NaN when the report lacks it
  double time = 0;               // seconds since the experiment started
  Json metrics;                  // every number the report held
};

// A PBT exploitation: at `iteration` this trial took `source`'s checkpoint and a perturbed
// version of its configuration.
struct Exploit {
  int iteration = 0;
  int source = -1;
  Json config;
};

struct Trial {
  int id = 0;
  Json config;  // name -> value
  TrialStatus status = TrialStatus::kPending;
  std::vector<Result> results;  // one per iteration, in order; never two of one iteration
  int stopAt = 0;               // where the current (or last) run ends
  int runStart = 0;             // the iteration the current (or last) run resumed from
  int checkpointAt = 0;         // the iteration its checkpoint holds (0: none)
  int failures = 0;             // runs that failed
  bool stoppedEarly = false;    // ended by the scheduler before the last iteration
  std::string error;            // why it ended as ERROR
  std::vector<Exploit> lineage;
  int np = 1;                   // workers of each run
  std::string node;             // where its current or last run is
  double workerIterations = 0;  // compute used: iterations trained x np, reruns included
  double busySeconds = 0;       // slot-seconds its runs held

  int iteration() const { return results.empty() ? 0 : results.back().iteration; }
  bool finished() const { return status == TrialStatus::kTerminated || status == TrialStatus::kError; }
  // The result at `iteration`, or nullptr.
  const Result* at(int iteration) const;
  // The best metric so far (by `sign`: +1 to maximize, -1 to minimize), NaN without one.
  double best(double sign) const;
  double last() const { return results.empty() ? std::nan("") : results.back().metric; }
};

// Score = sign x metric, so that higher is better for every scheduler; NaN (no metric) is worst.
inline double score(double metric, double sign) {
  return std::isnan(metric) ? -std::numeric_limits<double>::infinity() : sign * metric;
}

Json toJson(const Trial& t);
Trial trialFromJson(const Json& j);  // throws nlohmann::json::exception when malformed

}  // namespace gyre::tune
