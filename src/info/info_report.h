// What `gyre info` found, and its two renderings: aligned text for people, one JSON object for
// tools. Gathering is in info.cc; rendering is a pure function of the report.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "info/info_system.h"

namespace gyre::info {

struct LauncherStatus {
  std::string name;     // "gyre run", "mpirun", "srun", "torchrun", "ssh"
  std::string path;     // "" when not found
  std::string version;  // first line of its --version output; "" when not asked or it failed
  std::string note;     // what it is for, or why the version is missing
};

struct Report {
  std::string version;
  std::string executable;
  bool mpiTransport = false;  // built with GYRE_WITH_MPI
  std::vector<LauncherStatus> launchers;
  std::string mpiBenchmark;  // gyre_mpi_bench beside the executable, "" when not built
  TorchProbe torch;
  BlasProbe blas;
  std::string multiarch;
  Cores cores;
  // Compute-thread variables of this environment that decide how many threads a worker runs.
  std::vector<std::pair<std::string, std::string>> threadVariables;
  config::Env gyreEnv;  // the GYRE_* variables of this process
};

// The worker counts for which the text shows the default thread count: 1, 2, 4 and the usable
// cores, up to the larger of 4 and the usable cores.
std::vector<int> exampleWorkerCounts(int usableCores);

// The compute threads `gyre run` gives each of `localWorkers` workers on a host where it may use
// `usableCores` cores, asked of the launcher's own rule (launcher::threadEnvironment).
int defaultWorkerThreads(int usableCores, int localWorkers);

// GYRE_* variables of env that are not in the knob table (probably misspelt).
std::vector<std::string> unknownGyreVariables(const config::Env& env);

std::string formatReportText(const Report& report);
std::string formatReportJson(const Report& report);

}  // namespace gyre::info
