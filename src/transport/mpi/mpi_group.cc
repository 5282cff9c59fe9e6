// One MPI communicator per gyre communicator, made with MPI_Comm_create_group.
//
// Why a communicator of its own rather than a tag space on MPI_COMM_WORLD: MPI matches a
// message by (communicator, source, tag), so a communicator of its own is the only isolation
// that nothing else in the process can break. On MPI_COMM_WORLD, a program's own receive with
// MPI_ANY_TAG would take gyre's messages, and the tag space (31 bits in OpenMPI, 15 guaranteed)
// would have to hold both a communicator id that every member agrees on and a message number.
// MPI_Comm_create_group, unlike MPI_Comm_create or MPI_Comm_split, is collective over the new
// group only, so split() communicators (subsets of the world) can make theirs without the other
// ranks. Its `tag` must tell apart creations that overlap in time; Mesh::connect takes it from a
// counter in the store, which every communicator of a job shares.
//
// The cost: the call blocks until every member makes it. Mesh::connect calls it only after
// every member has answered on its control connection, so all of them are alive and about to
// make it; a member that dies in that window hangs the others here (under mpirun the launcher
// then ends the job). Below MPI_THREAD_MULTIPLE the call holds the process-wide MPI mutex while
// it waits.
#include "transport/mpi/mpi_group.h"

#include <algorithm>
#include <vector>

#include "common/check.h"

namespace gyre::transport::mpi {

Group::~Group() {
  if (Environment::finalized()) return;
  auto lock = env_->lock();
  MPI_Comm_free(&comm_);
}

std::shared_ptr<Group> createGroup(std::span<const int> worldRanks, int tag) {
  auto env = Environment::acquire();
  const int n = static_cast<int>(worldRanks.size());
  int self = -1;
  for (int r = 0; r < n; ++r) {
    const int w = worldRanks[r];
    GYRE_ARG_CHECK(w >= 0 && w < env->worldSize(), "transport mpi: rank ", r, " is MPI_COMM_WORLD rank ", w,
                   ", but MPI_COMM_WORLD has ", env->worldSize(),
                   " processes; start every rank of the job under one mpirun");
    for (int q = 0; q < r; ++q)
      GYRE_ARG_CHECK(worldRanks[q] != w, "transport mpi needs one MPI process per rank, but ranks ", q,
                     " and ", r, " are both MPI_COMM_WORLD rank ", w,
                     " (ranks that are threads of one process, or processes ",
                     "not started by one mpirun, cannot use it)");
    if (w == env->worldRank()) self = r;
  }
  GYRE_ENFORCE(self >= 0, "MPI_COMM_WORLD rank ", env->worldRank(), " is not among the communicator's ranks");
  GYRE_ARG_CHECK(tag >= 0 && tag <= env->tagUpperBound(), "MPI tag ", tag, " is out of range");

  MPI_Comm comm = MPI_COMM_NULL;
  int rank = -1;
  {
    auto lock = env->lock();
    MPI_Group world = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
    check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    const std::vector<int> ranks(worldRanks.begin(), worldRanks.end());
    const int included = MPI_Group_incl(world, n, ranks.data(), &members);
    MPI_Group_free(&world);
    check(included, "MPI_Group_incl");
    const int created = MPI_Comm_create_group(MPI_COMM_WORLD, members, tag, &comm);
    MPI_Group_free(&members);
    check(created, "MPI_Comm_create_group");
    // Errors on gyre's own communicator come back as codes, which the channels turn into gyre
    // errors, instead of aborting the process.
    int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &rank);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&comm);
      check(rc, "setting up the MPI communicator");
    }
  }
  auto group = std::make_shared<Group>(std::move(env), comm);
  GYRE_ENFORCE_EQ(rank, self, "MPI ranks of the new communicator must be the gyre ranks");
  return group;
}

}  // namespace gyre::transport::mpi
