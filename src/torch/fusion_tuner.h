// Autotuning of the gradient buckets (fusion) and the allreduce algorithm during the first steps
// of a job, as Horovod's autotune does for its fusion threshold and cycle time: pure arithmetic,
// no libtorch. The search is coordinate-wise: every bucket cap with the configured algorithm,
// then every other algorithm with the best cap. Each candidate runs a trial of `warmupSteps` steps
// that are not timed (the first after a change pays for moving the gradients) and `timedSteps`
// that are; the ranks agree on a trial's time (its slowest rank's median step), so every rank
// chooses alike. When every candidate has run, the fastest is kept.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gyre/types.h"

namespace gyre::torch::detail {

struct FusionChoice {
  std::size_t capBytes = 0;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  bool operator==(const FusionChoice&) const = default;
};

struct FusionTrial {
  FusionChoice choice;
  double stepSeconds = 0;  // the trial's median step, its slowest rank's
};

class FusionTuner {
 public:
  // caps: non-empty, each tried with `first`; algorithms: tried with the best cap after the caps
  // (`first` is left out of them).
  FusionTuner(std::vector<std::size_t> caps, AllreduceAlgorithm first,
              std::vector<AllreduceAlgorithm> algorithms, int warmupSteps = 1, int timedSteps = 4);

  // The choice the next step runs with.
  const FusionChoice& current() const { return current_; }
  bool done() const { return done_; }
  // One step's seconds, run with current(). Returns true when it ended a trial: then the caller
  // agrees on trialSeconds() with the other ranks and calls finishTrial().
  bool record(double seconds);
  // The median of the trial's timed steps on this rank (a step that also evaluated or saved a
  // checkpoint does not sway it).
  double trialSeconds() const;
  // Ends the trial with the agreed seconds: current() becomes the next candidate or, after the
  // last, the fastest (done()).
  void finishTrial(double agreedSeconds);

  const std::vector<FusionTrial>& trials() const { return trials_; }
  // The fastest trial so far (at least one must have finished).
  const FusionTrial& best() const;
  // "bucket cap 4 MiB, allreduce ring: 31.2 ms a step, the best of 6 tried (...)".
  std::string summary() const;

 private:
  void startNext();

  std::vector<FusionChoice> pending_;  // the candidates still to run, next first
  std::vector<AllreduceAlgorithm> algorithms_;
  int warmupSteps_;
  int timedSteps_;
  FusionChoice current_;
  bool capsDone_ = false;
  bool done_ = false;
  int stepsInTrial_ = 0;
  std::vector<double> timed_;
  std::vector<FusionTrial> trials_;
};

}  // namespace gyre::torch::detail
