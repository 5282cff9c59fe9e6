// Trial schedulers: pure decision functions over the trials' reported results, separate from the
// executor that runs trials (as Ray Tune's schedulers are). A scheduler keeps no state of its own
// beyond its options: every decision is computed from the trials (trial.h), so an experiment that
// resumes from its state file decides exactly as the first one would have.
//
// The runner asks, in its loop:
//   stopAt(trial)       where a run of the trial that starts now should end (a rung, a PBT interval,
//                       or the last iteration);
//   onResult(trial, r)  after each result: go on, or stop the trial for good (kStop);
//   onRunEnd(trial)     when a run ended at its stop point: go on at once, pause (to be resumed by
//                       next()), or stop; PBT also returns an exploitation;
//   next()              when a slot is free: the paused trial to resume, whether a new trial may
//                       start instead, and paused trials that will never run again.
//
//   fifo        every trial trains to the last iteration.
//   asha        ASHA (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys
//               2020), promotion-based: a trial pauses at each rung (grace x eta^k iterations);
//               a free slot promotes a paused trial that is in the top 1/eta of its rung's
//               results so far (the highest rung first), and starts a new trial only when none
//               can be promoted. Total compute for n trials: about n x grace x (rungs + 1) worth
//               of top-rung work; no trial waits for a rung to fill.
//   asha-stop   ASHA as Ray's AsyncHyperBandScheduler ships it: trials run on; at each rung a
//               trial below the (1 - 1/eta) quantile of the results recorded there earlier stops.
//   hyperband   HyperBand (Li et al., JMLR 2018): brackets s = s_max .. 0 of
//               ceil((s_max + 1) / (s + 1) x eta^s) trials starting at max_t x eta^-s iterations,
//               each a synchronous successive halving: when every trial of a rung is there, the
//               top 1/eta go on and the rest stop.
//   median      the median stopping rule (Golovin et al., Google Vizier, KDD 2017): after the grace
//               period, a trial whose best result is worse than the median of the other trials'
//               running means at the same iteration stops (once --min-samples others got there).
//   pbt         Population Based Training (Jaderberg et al. 2017): every --perturbation-interval
//               iterations a trial in the bottom --quantile takes the checkpoint of a random trial
//               in the top quantile and its configuration, perturbed (each mutated parameter
//               resampled with --resample-probability, else x0.8 or x1.2 within its range, or the next value
//               of a list); the lineage is recorded. Trials pause at each interval, so a population larger
//               than the slots takes turns (the least advanced runs first).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/space.h"
#include "tune/trial.h"

namespace gyre::tune {

struct SchedulerOptions {
  std::string name = "fifo";           // fifo, asha, asha-stop, hyperband, median, pbt
  int maxT = 9;                        // the most iterations a trial trains (Ray's max_t)
  int gracePeriod = 1;                 // asha, asha-stop: the first rung; median: no stop before it
  double eta = 3;                      // asha, asha-stop, hyperband: the reduction factor
  int minSamples = 3;                  // median: other trials needed at an iteration
  int perturbationInterval = 1;        // pbt
  double quantile = 0.25;              // pbt: the bottom and top fraction
  double resampleProbability = 0.25;   // pbt
  std::vector<std::string> mutations;  // pbt: the parameters perturbed (empty: every one)
  std::uint64_t seed = 0;              // pbt: its random choices, a function of (seed, trial, iteration)
};

// What the scheduler sees: every trial of the experiment, in creation order (trials[i].id == i).
struct Context {
  const std::vector<Trial>& trials;
  const Space& space;
  double sign = 1;          // +1: --mode max, -1: min
  bool moreToCome = false;  // the searcher can still create trials
};

enum class Verdict { kContinue, kPause, kStop };

struct Decision {
  Verdict verdict = Verdict::kContinue;
  std::optional<Exploit> exploit;  // pbt: take this checkpoint and configuration before going on
};

struct Plan {
  int resume = -1;        // a paused trial to run now
  bool newFirst = false;  // prefer a new trial to `resume` when one can be created
  bool allowNew = true;   // a new trial may start when there is nothing to resume
  std::vector<int> stop;  // paused trials that will never run again
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions o) : o_(std::move(o)) {}
  virtual ~Scheduler() = default;
  const SchedulerOptions& options() const { return o_; }
  // "asha (promotion; eta 3, grace 1, rungs 1, 3, 9)": what it does, for the output.
  virtual std::string describe() const = 0;
  // The iteration a run of `t` starting now ends at: above t's checkpoint, at most maxT.
  virtual int stopAt(const Context& c, const Trial& t) const;
  virtual Verdict onResult(const Context& c, const Trial& t, const Result& r) const;
  virtual Decision onRunEnd(const Context& c, const Trial& t) const;
  virtual Plan next(const Context& c) const;

 protected:
  SchedulerOptions o_;
};

// Throws InvalidArgument for an unknown name or options out of range (eta <= 1, grace < 1, a
// grace above maxT, a quantile outside (0, 0.5], a mutation that is not in `space`).
std::unique_ptr<Scheduler> makeScheduler(const SchedulerOptions& o, const Space& space);

// The rungs of asha and asha-stop: grace x eta^k below maxT, ascending.
std::vector<int> ashaRungs(int grace, double eta, int maxT);
// numpy's percentile with linear interpolation, of values that need not be sorted.
double percentile(std::vector<double> values, double q);

}  // namespace gyre::tune
