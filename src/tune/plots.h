// gyre tune's pictures of an experiment, written into its directory at the end (and after each
// --resume): index.html, one self-contained page with the summary, the plots inline and a table of
// the trials, and the plots as SVG files beside it:
//   curves.svg         every trial's metric against its iteration (the five best in colour);
//   curves-time.svg    the same against the experiment's seconds, which shows what the scheduler
//                      did: trials stopped early end early, paused ones pick up later;
//   search-NAME.svg    for each numeric parameter, each trial's best metric against its value
//                      (a log axis for loguniform), trials stopped early in grey.
#pragma once

#include <string>

#include "tune/experiment.h"

namespace gyre::tune {

// Writes the files; returns index.html's path. Throws SystemError when they cannot be written.
std::string writePlots(const ExperimentFiles& files, const ExperimentSpec& spec,
                       const ExperimentState& state);

}  // namespace gyre::tune
