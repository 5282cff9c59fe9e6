// What a collective algorithm sees: the mesh, the deadline of the current operation and a
// scratch buffer it may reuse between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "collectives/call_guard.h"
#include "common/clock.h"
#include "transport/mesh.h"

namespace gyre::collectives {

// A grow-only, 64-byte aligned buffer owned by the communicator.
class Scratch {
 public:
  // Returns at least `bytes` bytes; the pointer stays valid until the next call with more.
  void* get(std::size_t bytes);

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> data_;
  std::size_t capacity_ = 0;
};

struct CostModel;
struct Topology;

// Context::run's bookkeeping of the call guard, kept by the communicator between calls so that a
// collective allocates nothing for it.
struct GuardBook {
  std::vector<std::uint8_t> guarded;  // per peer: 1 guard sent, 2 guard received
  std::vector<CallGuard> received;    // per peer
  std::vector<transport::Op> withGuards;
  std::vector<int> moved;  // each op's index in withGuards
};

struct Context {
  transport::Mesh& mesh;
  Deadline deadline;
  Scratch& scratch;
  // Filled on first use by calibrate() (collective: every rank calls it together).
  CostModel& cost;
  // The call's guard (call_guard.h), sent before the first message to each peer and expected
  // before the first message from each; null: none (point-to-point). With it, a book: cleared
  // by the caller at the start of each call.
  const CallGuard* guard = nullptr;
  GuardBook* book = nullptr;
  // The communicator's hosts; null: unknown, taken as one host.
  Topology* topology = nullptr;
  // A run inside a group of the mesh's ranks: members[i] is the mesh rank of group rank i, and
  // rank(), size() and the peers of the ops given to run() are the group's. Empty: the whole mesh.
  std::span<const int> members{};
  int memberRank = 0;

  int rank() const { return members.empty() ? mesh.rank() : memberRank; }
  int size() const { return members.empty() ? mesh.size() : static_cast<int>(members.size()); }
  // Runs the ops, the guard's messages added where a peer is first sent to or received from.
  void run(std::vector<transport::Op>& ops);
  // The same call inside `group` (mesh ranks, ascending or not, this rank among them), with the
  // cost model that chooses algorithms for that group. The guard and its book stay the call's:
  // every mesh peer gets the guard once, whichever group first reaches it.
  Context within(std::span<const int> group, CostModel& groupCost) const;

 private:
  void runOnMesh(std::vector<transport::Op>& ops);
  void restorePeers(std::vector<transport::Op>& ops) const;
};

}  // namespace gyre::collectives
