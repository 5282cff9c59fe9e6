// The rank side of `gyre bench collectives`: a process started by the parent in hidden worker
// mode joins the communicator through the parent's TCP store and runs the sweep. Rank 0 sends one
// JSON row per measured size to the parent through a pipe.
#pragma once

#include <exception>
#include <functional>
#include <string>

#include "bench_options.h"
#include "bench_report.h"
#include "gyre/communicator.h"

namespace gyre::app {

// The options every rank creates its communicator with: the flags, plus the tuning knobs of the
// environment (GYRE_IFACE, GYRE_DEBUG_COLLECTIVES, GYRE_SPIN_US, GYRE_SHM_RING_BYTES,
// GYRE_COST_MODEL; docs/configuration.md). Throws InvalidArgument for a malformed knob.
CommunicatorOptions benchCommunicatorOptions(const BenchOptions& options, const std::string& secret);

// Runs the sweep on this rank: for every size and algorithm, the optional check, the warm-up and
// the timed calls. Every rank must call it with the same options. `onRow` is called on rank 0
// only, once per measured row, in sweep order. Returns the number of failed checks, which every
// rank knows. Throws what the collectives throw.
std::size_t runSweep(Communicator& comm, const BenchOptions& options,
                     const std::function<void(const BenchRow&)>& onRow);

// Returns the process exit code: 0 on success (failed checks are reported in the rows), 1 when
// the communicator or a collective failed (the message is on stderr).
int runBenchWorker(const BenchOptions& options);

// One stderr line for a rank that failed: a lost peer and a time-out are named as such.
void printRankError(int rank, const std::exception& e);

}  // namespace gyre::app
