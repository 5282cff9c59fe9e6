// A tune experiment as it lives on disk: everything needed to finish it after the tuner itself
// was killed (`gyre tune --resume DIR`).
//
//   DIR/experiment.json   the spec: search space, searcher, scheduler, metric, the trial command
//   DIR/state.json        every trial (trial.h): configuration, status, results, lineage;
//                         rewritten atomically (tmp + rename), at most twice a second and at the end
//   DIR/results.jsonl     every result, as it arrives (rewritten from state.json on resume)
//   DIR/trials.csv        one row per trial, rewritten with state.json
//   DIR/trials/N/         trial N: output.log, its reports, its checkpoint (ckpt/) and the copy of
//                         it taken when its last run ended (saved/), which PBT exploits
//
// A report that reached a trial's files but not state.json is read again on resume (a trial's
// reports are files it appends to); a trial created but not yet in state.json is created again,
// from the same draw.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tune/scheduler.h"
#include "tune/searcher.h"
#include "tune/space.h"
#include "tune/trial.h"

namespace gyre::tune {

struct ExperimentSpec {
  Space space;
  SearcherOptions search;
  SchedulerOptions scheduler;
  std::string metric = "accuracy";
  std::string mode = "max";  // max or min
  int np = 1;                // workers (slots) per trial
  int maxFailures = 1;       // runs a trial may fail and be retried
  // The trial: gyre train with these flags (builtin), or a command with {placeholders}.
  bool builtin = true;
  std::vector<std::string> trainArgs;  // builtin: gyre train flags given to every trial
  std::vector<std::string> command;    // otherwise
  int threads = 1;                     // builtin: compute threads per worker

  double sign() const { return mode == "min" ? -1.0 : 1.0; }
};

Json toJson(const ExperimentSpec& s);
// Throws InvalidArgument naming the file when it is not one gyre tune wrote.
ExperimentSpec specFromJson(const Json& j, const std::string& path);

struct ExperimentState {
  std::vector<Trial> trials;
  double elapsedBefore = 0;  // seconds of earlier tuner processes (resumed experiments)
  int planned = 0;           // the trials the searcher will make (not saved: the spec says it)
};

class ExperimentFiles {
 public:
  explicit ExperimentFiles(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string trialDir(int id) const;

  // A new experiment: DIR must not hold one already. Writes experiment.json.
  void create(const ExperimentSpec& spec) const;
  // Throws InvalidArgument when DIR holds no experiment (naming the files it looked for).
  ExperimentSpec loadSpec() const;
  ExperimentState loadState() const;  // empty when there is none yet
  // state.json, with `elapsedS` for its elapsed_s (the seconds of every tuner process so far), and
  // trials.csv unless `withTable` is false.
  void saveState(const ExperimentState& state, double elapsedS, const ExperimentSpec& spec,
                 bool withTable = true) const;
  void appendResult(const Trial& t, const Result& r) const;
  void rewriteResults(const ExperimentState& state) const;

 private:
  std::string dir_;
  mutable std::map<int, std::string> finishedText_;  // state.json's text of finished trials
};

}  // namespace gyre::tune
