// Bootstrapping a communicator from the environment a launcher set.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "gyre/communicator.h"

namespace gyre {

// What the environment says about this process's place in the job.
struct LaunchInfo {
  std::string launcher;  // "gyre", "mpirun", "slurm", "torchrun" or "none"
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  // "host:port" of the TCP store, or "file:PATH" of a file store. Empty for size 1, and when
  // storeOverMpi (below).
  std::string storeAddress;
  // True when this rank must start the TCP store server (rank 0 under torchrun and Slurm).
  bool hostStore = false;
  // Under mpirun with GYRE_TRANSPORT=mpi and no store address given: world rank 0 hosts a TCP
  // store on a free port and broadcasts its address over MPI (with a fresh secret when
  // GYRE_SECRET is not set); storeAddress and, then, secret are empty until init() does so, and
  // hostStore is true on rank 0 only.
  bool storeOverMpi = false;
  std::string secret;
  std::string jobId;
};

// Reads, in order of precedence, gyre's GYRE_* variables (set by `gyre run`), OpenMPI's
// (OMPI_COMM_WORLD_*), Slurm's (SLURM_PROCID, ...) and torchrun's (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, LOCAL_RANK). `env` is the environment as a map, so tests can pass
// their own; see docs/launching.md for every variable.
// Throws InvalidArgument naming the variable when a value is malformed.
LaunchInfo detectLaunch(const std::map<std::string, std::string>& env);

// The process environment as a map.
std::map<std::string, std::string> processEnvironment();

// Creates the world communicator described by the process environment (detectLaunch), with the
// GYRE_* knobs applied to `options` (time-out, transport, interface, debug mode).
// A process started with no launcher variables is a world of one.
std::shared_ptr<Communicator> init(CommunicatorOptions options = {});

}  // namespace gyre
