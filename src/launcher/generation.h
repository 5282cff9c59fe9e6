// One generation of a `gyre run` job: a store of its own (a fresh secret on a fresh port), one
// agent per host, and the workers they start, supervised until every worker has exited or the
// generation is stopped. The first failure stops it, and so do --timeout and an interrupt.
//
// `gyre run --max-restarts K` runs up to K + 1 generations one after another (job.cc). Nothing
// outlives its generation: its agents have exited (or were killed) and its store is closed before
// runGeneration() returns, and a straggler that somehow survived holds the old secret and address,
// which the next generation's store and transport connections refuse.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "launcher/failures.h"
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/output.h"

namespace gyre::launcher {

struct GenerationSpec {
  const RunOptions* options = nullptr;
  std::vector<HostPlacement> placement;
  int worldSize = 0;
  std::string jobId;   // the same in every generation (GYRE_JOB_ID)
  int generation = 0;  // GYRE_RESTART_COUNT: 0 first
  int maxRestarts = 0;
  std::vector<std::uint16_t> usedStorePorts;  // earlier generations' stores: never reused
  Deadline jobDeadline = Deadline::never();   // --timeout, across generations
};

// Runs one generation to its end and says how it ended. Workers' output goes to `output` as it
// arrives. Throws InvalidArgument when the store cannot be placed (no address remote hosts reach).
// The outcome's storePort is the port this generation's store listened on.
GenerationOutcome runGeneration(const GenerationSpec& spec, OutputSink& output);

}  // namespace gyre::launcher
