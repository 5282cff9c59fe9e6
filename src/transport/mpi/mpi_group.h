// Group: the MPI communicator of one gyre communicator, shared by the channels of its Mesh and
// freed with the last of them.
#pragma once

#include <mpi.h>

#include <memory>

#include "transport/mpi/mpi_env.h"
#include "transport/mpi/mpi_transport.h"

namespace gyre::transport::mpi {

class Group {
 public:
  // Takes ownership of `comm` (freed by the destructor unless MPI was finalized first).
  Group(std::shared_ptr<Environment> env, MPI_Comm comm) : env_(std::move(env)), comm_(comm) {}
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  MPI_Comm comm() const { return comm_; }
  Environment& env() const { return *env_; }

 private:
  std::shared_ptr<Environment> env_;  // keeps MPI initialized while comm_ exists
  MPI_Comm comm_;
};

}  // namespace gyre::transport::mpi
