// `gyre bench collectives` as one rank of a job that a launcher started (`gyre run`, mpirun,
// srun, torchrun): instead of starting ranks itself, the process joins the job's world through
// gyre::init() and runs the sweep with the other ranks. Rank 0 prints the table (or the JSON
// lines); the other ranks print nothing but errors.
#pragma once

#include "bench_options.h"
#include "gyre/init.h"

namespace gyre::app {

// detectLaunch() of this process's environment, without its warnings: when a launcher started
// the process, init() detects the launch again and warns then, once per rank.
LaunchInfo detectLaunchQuietly();

// Runs this process's rank of the benchmark. `job` is detectLaunch() of the process environment
// (launcher != "none"); `npGiven` says whether --np was on the command line, which then must
// equal the job's size. `--baseline mpi` is refused: its OpenMPI run needs the cores the job's
// ranks hold. --timeout bounds the whole rank (the start-up included); --op-timeout and
// --transport win over GYRE_TIMEOUT_MS and GYRE_TRANSPORT, as in the bench's own ranks.
// Returns the process exit code: 0; 1 when the communicator or a collective failed, a check
// failed (on every rank) or --timeout passed (the message is on stderr). Throws InvalidArgument
// for a command line or GYRE_* variable that does not fit the job.
int runLaunchedBench(BenchOptions options, bool npGiven, const LaunchInfo& job);

}  // namespace gyre::app
