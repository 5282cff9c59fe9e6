// `gyre bench rt` apart from running anything: its settings, what a round measures (the calls of
// a batch, the object of the puts and gets, the rollout actors and their steps), the names of the
// rows that depend on them, and the one check --across-hosts makes of the job it runs in. No
// runtime and no threads: bench_rt_measure.cc measures the rows, bench_rt.cc runs the rounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre::app {

struct RtBenchSettings {
  double seconds = 2;  // per row
  int threads = 2;     // per process of the runtime
  int repeat = 1;      // rounds of every row; a row reports the median
  bool json = false;
  bool acrossHosts = false;  // the ranks of a launched job: an object's gets from the other hosts
  bool python = false;       // the rows from Python (gyre.rt): bench/rt/python_rt.py
  int workers = 2;           // --python: gyre.rt.init's worker processes
};

// Calls made before waiting for their answers, in the async rows.
inline constexpr int kRtCallBatch = 1000;
// The object of the put and get rows: 100 MB ("put 100 MB", ...).
inline constexpr std::size_t kRtObjectBytes = std::size_t{100} << 20;
// The rollout rows: one per count of actors, each actor stepping its CartPole this many steps a call.
inline constexpr int kRtRolloutActors[] = {1, 2, 4};
inline constexpr std::int64_t kRtRolloutSteps = 20000;

// "cartpole env steps, 1 actor", "cartpole env steps, 2 actors".
std::string rolloutRowName(int actors);

// --across-hosts: where the reader on `rank` is, seen from rank 0: "rank 1, this host" (rank 0's
// host), "rank 2, another host, fetched" (the first reader on its host) or "rank 3, another host,
// its copy" (a later one, which maps what the first fetched).
std::string readerWhere(int rank, bool rankZerosHost, bool hostSeen);

// --across-hosts runs as the ranks of a job of 2 or more: throws InvalidArgument for a job of
// `size` ranks that is not.
void checkAcrossHostsJob(int size);

}  // namespace gyre::app
