// The OpenMPI baseline of `gyre bench collectives --baseline mpi`: runs the project's own
// gyre_mpi_bench (bench/mpi/mpi_collectives_bench.c) under mpirun over the same op, sizes,
// iterations and placement, and returns its time per size.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "bench_options.h"
#include "common/clock.h"

namespace gyre::app {

struct MpiBaseline {
  std::string program;                     // the gyre_mpi_bench that ran
  std::map<std::uint64_t, double> timeUs;  // bytes -> max over ranks of the mean time per call
};

// Throws InvalidArgument when mpirun or gyre_mpi_bench cannot be found or the dtype has no MPI
// equivalent, and Error when the MPI run fails or times out (the message says why).
MpiBaseline runMpiBaseline(const BenchOptions& options, Deadline deadline);

}  // namespace gyre::app
