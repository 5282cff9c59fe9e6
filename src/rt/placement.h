// Where tasks and actors go: the next live process in turn, or, for an actor that names a host or
// declares what it needs (ActorOptions), the first process that fits. What each process offers
// and what is reserved there are kept in the job's store (store_keys.h), so that processes that
// place at the same time reserve atomically, and none reserves more than a process offers.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "gyre/rt/runtime.h"
#include "rt/peers.h"

namespace gyre::rt::detail {

class Placement {
 public:
  // `options` and `peers` are the runtime's, and outlive this.
  Placement(const RuntimeOptions& options, Peers& peers) : o_(options), peers_(peers) {}
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

  // Publishes what this process offers actors (RuntimeOptions::cpus, else `threads`;
  // ::memoryBytes, else this host's physical memory) and its host name.
  void offer(int threads);
  // The next process in turn that is not lost (this one never is) and takes calls placed in turn
  // (RuntimeOptions::placeHere); this one when no other does.
  int spread();
  // The process for an actor of these options, with what it declared reserved there.
  // InvalidArgument, naming what the processes offer, when none fits.
  int placeActor(const ActorOptions& a);
  // Gives back what an actor reserved on process `rank` (placeActor).
  void release(int rank, double cpus, std::int64_t memoryBytes);

 private:
  // Whether process `rank` takes calls placed in turn: its RuntimeOptions::placeHere, read from
  // the store once.
  bool placeable(int rank);

  const RuntimeOptions& o_;
  Peers& peers_;
  std::atomic<std::uint64_t> next_{0};
  // placeable(), known: 0 not yet, 1 yes, 2 no.
  std::vector<std::atomic<int>> placeable_ = std::vector<std::atomic<int>>(static_cast<std::size_t>(o_.size));
};

}  // namespace gyre::rt::detail
