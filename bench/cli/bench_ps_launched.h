// `gyre bench ps --part throughput` as a worker of `gyre run --servers S` (GYRE_PS_SERVERS set):
// the job's S server processes, wherever gyre run placed them (--server-hosts), instead of
// servers in this process, and the job's ranks as the workers. Every rank runs the same loop as
// the in-process part (bench_ps_throughput.h); rank 0 reports. This is how the single-server
// bottleneck shows on separate hosts with their own links (tests/netns/ps_bound.sh). See
// docs/benchmarks.md, `gyre bench ps`.
#pragma once

#include <cstddef>
#include <vector>

#include "bench_ps_plan.h"
#include "bench_ps_report.h"

namespace gyre::app {

// True when this process runs under `gyre run --servers` (GYRE_PS_SERVERS is set).
bool launchedWithServers();

// The job's number of servers (GYRE_PS_SERVERS). Throws InvalidArgument outside such a job.
int launchedServerCount();

// Measures the job's servers with every rank of gyre::init()'s world as a worker (s.workers and
// s.servers are ignored: the job fixes both). Worker 0 initializes every key; every worker runs
// s.warmup untimed steps; a barrier; then the timed steps: s.steps each, or for about s.seconds,
// all workers ending on the same step (agreed through the communicator, so that no worker waits
// on one that stopped). The point's figures are every worker's added up (steps, bytes, clock
// wait) over the slowest worker's timed seconds, the same as the in-process part's; no server
// figures (those are other processes). Every rank gets the same figures. Blocking
// parameter-server calls are bounded by GYRE_TIMEOUT_MS (default 120 s), collectives by the
// communicator's time-out. Throws what the worker or communicator threw.
struct LaunchedThroughput {
  ThroughputPoint point;
  int rank = 0;
  // The slowest worker's own timed steps / its own timed seconds: the rate of the job's global
  // steps (under bsp every worker's; under asp the laggard's).
  double minWorkerStepsPerS = 0;
};
LaunchedThroughput measureLaunchedThroughput(const ThroughputSettings& s,
                                             const std::vector<std::size_t>& keySizes);

// Part 1 as a worker of `gyre run --servers S` (f.throughput checked already, checkLaunchedFlags
// passed): measures, and on rank 0 prints the one row (or with f.json one object). Returns 0, or
// 1 when the measurement failed (the message is on stderr). Throws InvalidArgument for a job that
// does not fit.
int runLaunchedThroughputPart(const PsBenchFlags& f, const PsMachine& m);

}  // namespace gyre::app
