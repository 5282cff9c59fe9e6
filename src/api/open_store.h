// The job's store, as a launcher's variables describe it (detectLaunch): a file store, the TCP
// store of `gyre run` or Slurm/torchrun (hosted by this rank when info.hostStore), one reached over
// MPI, or one in memory for a world of one. gyre::init and gyre::rt's environment options open it
// this way.
#pragma once

#include <memory>

#include "common/config.h"
#include "gyre/communicator.h"
#include "gyre/init.h"
#include "gyre/store.h"

namespace gyre {

std::shared_ptr<Store> openLaunchStore(LaunchInfo& info, const config::Env& env, CommunicatorOptions& options);

}  // namespace gyre
