// The tuner's loop: creates trials from the searcher, runs them on the executor, reads their
// reports, lets the scheduler decide, and keeps the experiment's files (experiment.h) current.
// One thread; it waits on the executor (which wakes as soon as a run ends) for at most 50 ms at
// a time, so reports are read within that and a slot is refilled as soon as it frees.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "tune/executor.h"
#include "tune/experiment.h"

namespace gyre::tune {

struct RunnerOptions {
  std::string gyre;             // this gyre executable, for built-in trials and np > 1
  bool resume = false;          // continue the experiment in the directory
  bool live = false;            // a table redrawn in place (a terminal) rather than a line per event
  bool json = false;            // print the summary as one JSON line at the end
  double stateIntervalS = 0.5;  // the most often state.json is rewritten
  std::FILE* out = stdout;
};

struct Summary {
  int bestTrial = -1;
  double bestMetric = 0;
  int bestIteration = 0;
  Json bestConfig;
  std::string bestCheckpoint;
  int trials = 0, terminated = 0, errors = 0, stoppedEarly = 0;
  double workerIterations = 0;
  double busySlotSeconds = 0;
  double elapsedS = 0;
  int slots = 0;
  double utilisation() const { return elapsedS > 0 && slots > 0 ? busySlotSeconds / (slots * elapsedS) : 0; }
  Json toJson(const std::string& metric) const;
};

// Runs the experiment to its end (or an interrupt); returns gyre tune's exit code: 0 when every
// trial ended (some may be ERROR), 1 when the experiment itself failed (a metric no trial reports),
// 128 + the signal after SIGINT/SIGTERM/SIGHUP (the experiment can be resumed).
int runExperiment(const ExperimentSpec& spec, const ExperimentFiles& files, Executor& executor,
                  const RunnerOptions& o, Summary* summary = nullptr);

}  // namespace gyre::tune
