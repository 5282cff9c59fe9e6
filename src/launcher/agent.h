// The per-host agent of `gyre run` (`gyre agent`, started by the launcher): reads its AgentSpec
// from stdin, finds the job's store, starts this host's workers with their environment, relays
// their output and exits as Events on stdout, and stops them all (and anything they started)
// when the launcher says stop, when its stdin ends, or when it gets SIGINT/SIGTERM/SIGHUP. An agent
// may run a host's parameter servers instead (`gyre run --servers`; AgentSpec::serverIndices).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gyre::launcher {

// Runs the agent on the given descriptors; returns the process's exit code (0 once every
// worker ran and was reported, whatever their exit codes; 1 when the agent itself failed).
int runAgent(int inFd, int outFd);

// The environment a worker gets for its compute threads: GYRE_NUM_THREADS is `threads`;
// OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS follow it unless `isSet` says the
// user set them. threads == 0 means cores / workers on the host (at least 1).
struct ThreadEnv {
  int threads = 1;
  std::vector<std::pair<std::string, std::string>> env;
};
ThreadEnv threadEnvironment(int threads, int cores, int localWorkers,
                            const std::function<bool(const std::string&)>& isSet);

// CPUs this process may run on (sched_getaffinity), at least 1.
int usableCores();

}  // namespace gyre::launcher
