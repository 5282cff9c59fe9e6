// Memory that every rank of a communicator maps, when all of them run on one host and reach
// each other over shared memory (Communicator::allocateShared). Zero-filled at first; what one
// rank writes, the others see. Ordering is the caller's business: a collective (a barrier, or
// any message between the ranks) after the writes makes them visible to the ranks after it.
#pragma once

#include <cstddef>

namespace gyre {

class SharedMemory {
 public:
  SharedMemory(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
  ~SharedMemory();  // unmaps this rank's view; the memory goes when the last rank unmaps it
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  void* data() const { return base_; }
  std::size_t size() const { return bytes_; }

 private:
  void* base_;
  std::size_t bytes_;
};

}  // namespace gyre
