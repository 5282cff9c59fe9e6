// The MPI transport's seam, free of <mpi.h>: what Mesh::connect and gyre::init need from MPI.
// With GYRE_WITH_MPI these are implemented in this folder; without it, disabled.cc implements
// them by throwing InvalidArgument, so the rest of gyre builds and runs without MPI.
//
// Only the data path goes over MPI: Mesh::connect still makes the authenticated TCP control
// connections (goodbyes, aborts, and a dead peer's EOF), and the ranks still meet in the store.
//
// MPI itself is process-wide: it is initialized lazily, the first time this transport is used,
// with MPI_Init_thread asking for MPI_THREAD_MULTIPLE (or taken as the program left it, when the
// program initialized MPI itself), and finalized at exit only if gyre initialized it, once the
// last communicator that uses it is gone. With less than MPI_THREAD_MULTIPLE, every MPI call gyre
// makes is serialized through one process-wide mutex.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "common/clock.h"
#include "transport/channel.h"

namespace gyre::transport::mpi {

// Throws InvalidArgument when this build has no MPI transport (GYRE_WITH_MPI off).
void requireAvailable();

// Initializes MPI if needed and returns this process's rank and the size of MPI_COMM_WORLD.
struct WorldPlace {
  int rank = 0;
  int size = 1;
};
WorldPlace worldPlace();

// The MPI communicator shared by the channels of one Mesh. Opaque outside this folder.
class Group;

// Creates the MPI communicator of one gyre communicator: the MPI_COMM_WORLD ranks
// `worldRanks[0..n)` in gyre rank order (so a rank's MPI rank in it is its gyre rank).
// Collective over those processes, all of which must call it with the same ranks and `tag`
// (unique among the creations that may run at the same time; see mpi_group.cc).
// Throws InvalidArgument when two gyre ranks are one MPI process.
std::shared_ptr<Group> createGroup(std::span<const int> worldRanks, int tag);

// The channel between this rank and `peer` (a gyre rank) of `group`.
std::unique_ptr<Channel> createChannel(std::shared_ptr<Group> group, int peer);

// Collective over MPI_COMM_WORLD: world rank 0's `text` is returned on every rank (others'
// `text` is ignored). Used only at bootstrap, when every process calls gyre::init().
std::string broadcastFromRoot(const std::string& text);

}  // namespace gyre::transport::mpi
