// The store of a job started by mpirun with the MPI transport and no store address
// (LaunchInfo::storeOverMpi): world rank 0 hosts a TCP store on a free port and broadcasts its
// address over MPI_COMM_WORLD, with a fresh secret when the ranks have none. No MASTER_ADDR, no
// port to pick, no file, whether the job spans one host or many.
#pragma once

#include <memory>

#include "gyre/communicator.h"
#include "gyre/init.h"

namespace gyre {

// Collective over MPI_COMM_WORLD (initializing MPI if needed): every process of the job calls
// it, from init(). Sets info.storeAddress, and options.secret when it was empty. Rank 0 hosts on
// GYRE_IFACE (options.interface) if set, else on loopback for a single-host job, else on this
// host's first external address. When rank 0 cannot host, every rank throws (rank 0 tells the
// others why). Throws InvalidArgument in a build without MPI.
std::shared_ptr<Store> openStoreOverMpi(LaunchInfo& info, CommunicatorOptions& options);

}  // namespace gyre
