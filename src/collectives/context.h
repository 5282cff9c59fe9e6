// What a collective algorithm sees: the mesh, the deadline of the current operation and a
// scratch buffer it may reuse between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

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

struct Context {
  transport::Mesh& mesh;
  Deadline deadline;
  Scratch& scratch;
  // Filled on first use by calibrate() (collective: every rank calls it together).
  CostModel& cost;

  int rank() const { return mesh.rank(); }
  int size() const { return mesh.size(); }
  void run(std::vector<transport::Op>& ops) { mesh.run(ops, deadline); }
};

}  // namespace gyre::collectives
