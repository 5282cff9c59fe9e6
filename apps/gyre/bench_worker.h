// The rank side of `gyre bench collectives`: a process started by the parent in hidden worker
// mode joins the communicator through the parent's TCP store and runs the sweep. Rank 0 sends one
// JSON row per measured size to the parent through a pipe.
#pragma once

#include <string>

#include "bench_options.h"
#include "gyre/communicator.h"

namespace gyre::app {

// The options every rank creates its communicator with: the flags, plus the tuning knobs of the
// environment (GYRE_IFACE, GYRE_DEBUG_COLLECTIVES, GYRE_SPIN_US, GYRE_SHM_RING_BYTES,
// GYRE_COST_MODEL; docs/configuration.md). Throws InvalidArgument for a malformed knob.
CommunicatorOptions benchCommunicatorOptions(const BenchOptions& options, const std::string& secret);

// Returns the process exit code: 0 on success (failed checks are reported in the rows), 1 when
// the communicator or a collective failed (the message is on stderr).
int runBenchWorker(const BenchOptions& options);

}  // namespace gyre::app
