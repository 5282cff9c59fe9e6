// `gyre bench ps`, part 1: parameter-server throughput versus the number of servers, measured in
// this process. For one point it starts S ps::Server's on 127.0.0.1 and W worker threads, each a
// ps::Worker connected to all of them, which push and pull the whole model every step. See
// docs/benchmarks.md, `gyre bench ps`.
#pragma once

#include <cstddef>
#include <vector>

#include "bench_ps_plan.h"
#include "bench_ps_report.h"

namespace gyre::app {

// Measures one number of servers: worker 0 initializes every key; each worker runs s.warmup
// untimed steps; then every worker runs the timed steps (s.steps each, or for about s.seconds,
// all workers ending on the same step so that no worker waits on one that stopped). Every blocking
// call is bounded by s.timeoutS. Throws what the servers or workers threw (the first failure),
// after every thread has ended.
ThroughputPoint measureThroughput(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                  int numServers);

// Part 1: measures every number of servers of f.throughput (checked already), printing the
// settings and a row as each is measured (or with f.json one object at the end), then the
// summary. Returns 0, or 1 when a point failed (the message is on stderr).
int runThroughputPart(const PsBenchFlags& f, const PsMachine& m);

}  // namespace gyre::app
