// What a collective algorithm sees: the mesh, the deadline of the current operation and a
// scratch buffer it may reuse between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

  int rank() const { return mesh.rank(); }
  int size() const { return mesh.size(); }
  // Runs the ops, the guard's messages added where a peer is first sent to or received from.
  void run(std::vector<transport::Op>& ops);

};

}  // namespace gyre::collectives
