// Reporting from a trial of `gyre tune` (docs/tune.md): a program that `gyre tune ... -- ./prog
// --lr {lr}` runs calls report() once per iteration (an epoch, an evaluation) with the numbers it
// measured; the tuner's scheduler decides from them whether the trial goes on, pauses or stops.
//
//   for (int epoch = gyre::tune::startIteration() + 1; epoch <= epochs; ++epoch) {
//     ...train one epoch, then save a checkpoint in gyre::tune::checkpointDir()...
//     gyre::tune::report({{"accuracy", accuracy}, {"loss", loss}});
//   }
//
// Save the checkpoint before the report: the tuner may stop the run as soon as the report
// arrives. When startIteration() is above 0, the trial resumes: load the checkpoint first. Outside
// a trial every call is harmless: report() writes nothing and the others return empty values, so
// the same program runs on its own. In a distributed trial (np > 1) only rank 0's reports are
// kept; every rank may call report().
//
// Thread-safety: report() may be called from any thread; the reports are numbered in the order
// the calls take place.
#pragma once

#include <map>
#include <string>

namespace gyre::tune {

// True when this process is a run of a gyre tune trial.
bool inTrial();

// Records one result of this trial: the next iteration (startIteration() + 1 for the first call
// of the process). Returns the iteration recorded, or 0 when nothing was written (outside a
// trial, or on a rank other than 0). Non-finite values are written as null. Throws gyre::Error
// when the report file cannot be written (a full disk, say).
int report(const std::map<std::string, double>& metrics);
// The same, recorded as `iteration`: for a program that resumed from a checkpoint of its own newer
// than startIteration() (saved, then stopped before its report). Later calls without an iteration
// go on from it. The tuner keeps the first report of each iteration.
int report(const std::map<std::string, double>& metrics, int iteration);

// The iteration the trial's checkpoint holds, to resume from (0: start afresh).
int startIteration();
// The iteration this run ends at (0 outside a trial).
int stopAt();
// Where the trial keeps its checkpoint ("" outside a trial).
std::string checkpointDir();
// The trial's own directory ("" outside a trial).
std::string trialDir();
// The trial's number (-1 outside a trial).
int trialId();

}  // namespace gyre::tune
