// What a trial's run executes, and how its reports are read.
//
// Built in (`gyre tune --model mlp ...`): `gyre train` with the experiment's train flags, the
// trial's parameters as flags (lr -> --lr 0.01, weight_decay -> --weight-decay 0), --epochs set to
// the run's stop point, and its run and checkpoint directories in the trial's directory, always
// with --resume: a run continues from the trial's checkpoint, and the first starts afresh. Its
// reports are metrics.jsonl's lines: iteration = epoch, every number in the line, and `accuracy`
// for test_accuracy.
//
// A command (`gyre tune ... -- ./prog --lr {lr}`): {NAME} is replaced by the parameter's value,
// and {trial_id}, {trial_dir}, {checkpoint_dir}, {stop_at} and {start_iteration} by the run's.
// The same are in its environment (GYRE_TUNE_TRIAL_ID, GYRE_TUNE_TRIAL_DIR,
// GYRE_TUNE_CHECKPOINT_DIR, GYRE_TUNE_STOP_AT, GYRE_TUNE_START_ITERATION), with
// GYRE_TUNE_REPORT_FILE, where gyre::tune::report() (gyre/tune.h) appends its reports. With
// np > 1 it runs under `gyre run -np N`. A program that keeps its state saves it in
// checkpoint_dir before it reports, and restores from there when start_iteration > 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tune/executor.h"
#include "tune/experiment.h"
#include "tune/trial.h"

namespace gyre::tune {

struct RunPaths {
  std::string trialDir;
  std::string checkpointDir;  // trialDir/ckpt
  std::string reportFile;     // metrics.jsonl (built in) or result.jsonl
  std::string logFile;        // output.log
};

RunPaths runPaths(const ExperimentSpec& spec, const std::string& trialDir);

// The run of `t` from its checkpoint to t.stopAt. `gyre` is this gyre executable.
RunSpec runSpec(const ExperimentSpec& spec, const Trial& t, const RunPaths& paths, const std::string& gyre);

// A report line as a Result (time left 0), or nullopt for a line that is not a JSON object. Its
// iteration is its "iteration" (gyre::tune::report writes one) or "epoch" (metrics.jsonl lines
// written some other way), else the one after `previous`.
std::optional<Result> parseReport(const std::string& line, const std::string& metric, int previous);

// "--lr": the gyre train flag a parameter sets.
std::string trainFlag(const std::string& param);
// The parameters that resuming a gyre train checkpoint refuses to change (PBT cannot mutate them).
bool fixedOnResume(const std::string& param);

}  // namespace gyre::tune
