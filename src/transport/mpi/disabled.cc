// The MPI transport's seam in a build without MPI (GYRE_WITH_MPI off): asking for it is an
// InvalidArgument that says how to get it.
#include "common/check.h"
#include "transport/mpi/mpi_transport.h"

namespace gyre::transport::mpi {
namespace {

[[noreturn]] void unavailable() {
  GYRE_THROW(
      InvalidArgument,
      "transport mpi was requested, but this gyre was built without MPI: install an MPI library "
      "(libopenmpi-dev) and configure with -DGYRE_WITH_MPI=ON, or use GYRE_TRANSPORT=auto, tcp or shm");
}

}  // namespace

class Group {};

void requireAvailable() {
  unavailable();
}
WorldPlace worldPlace() {
  unavailable();
}
std::shared_ptr<Group> createGroup(std::span<const int>, int) {
  unavailable();
}
std::unique_ptr<Channel> createChannel(std::shared_ptr<Group>, int) {
  unavailable();
}
std::string broadcastFromRoot(const std::string&) {
  unavailable();
}

}  // namespace gyre::transport::mpi
