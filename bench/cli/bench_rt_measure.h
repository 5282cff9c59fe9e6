// One round of `gyre bench rt`'s measurements. On loopback: Ray's microbenchmark set on Runtimes of
// this process, each with its own threads, listening on loopback, so that every remote call
// crosses a real authenticated TCP connection with its arguments and result serialized; then puts
// and gets of 100 MB beside memcpy, and CartPole rollout actors. Across hosts: one object read
// from every rank of a launched job. Rows come without targets (setRtTargets adds them).
#pragma once

#include <vector>

#include "bench_rt_plan.h"
#include "bench_rt_report.h"
#include "gyre/rt.h"

namespace gyre::app {

// Every row, each measured for s.seconds with s.threads threads per process (the rollout rows:
// as many threads as actors): sync and async tasks, 1:1 sync and async actor calls, in process and
// over loopback TCP; n:n async actor calls (n = 2); memcpy, put and get of 100 MB as a value and
// in shared memory (in process, over loopback, mapped in another process); env steps/s of 1, 2
// and 4 rollout actors over two processes. Throws what the runtime throws.
std::vector<RtRow> measureOnLoopback(const RtBenchSettings& s);

// --across-hosts, in rank 0 of a launched job (`rt` is its Runtime): a 100 MB object put here in
// shared memory, then read by every other rank in turn, each keeping what it read: a rank on
// another host than the ones before it fetches it over the network; the ranks after it on its
// host map that host's copy and receive nothing. Each row: GB/s of the get and the MB its host
// received meanwhile. Throws Error when a rank reads another size than the object's.
std::vector<RtRow> measureAcrossHosts(rt::Runtime& rt);

}  // namespace gyre::app
