// Helpers shared by the algorithm files: element-aligned block partitions of a buffer and the op
// list of one Context::run.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "collectives/context.h"
#include "gyre/types.h"
#include "transport/mesh.h"

namespace gyre::collectives {

// `count` elements split into `parts` blocks on element boundaries: the first count % parts
// blocks hold one element more, so blocks may be empty when count < parts. Both ends of every
// transfer compute the same partition, which is what keeps their op lists matched.
class Blocks {
 public:
  Blocks(std::size_t count, int parts, std::size_t elementSize)
      : base_(count / static_cast<std::size_t>(parts)),
        extra_(count % static_cast<std::size_t>(parts)),
        elementSize_(elementSize) {}

  std::size_t count(int block) const { return base_ + (static_cast<std::size_t>(block) < extra_ ? 1 : 0); }
  std::size_t bytes(int block) const { return count(block) * elementSize_; }
  std::size_t offset(int block) const {
    const auto b = static_cast<std::size_t>(block);
    return (b * base_ + (b < extra_ ? b : extra_)) * elementSize_;
  }

 private:
  std::size_t base_;
  std::size_t extra_;
  std::size_t elementSize_;
};

// The ops of one exchange. Zero-byte ops are not added (both ends compute the same size, so they
// drop them together) and report index -1, which as an `after` means "no dependency"; an op
// only ever depends on an op over the same block, so a dropped op has only dropped dependents.
class OpList {
 public:
  // Room for a typical exchange up front (also keeps GCC 12 from a false -Wstringop-overflow on
  // the first push_back at -O3).
  OpList() { ops_.reserve(8); }

  int send(int peer, const void* data, std::size_t bytes, int after = -1) {
    return add(transport::Op::send(peer, data, bytes, after));
  }
  int recv(int peer, void* data, std::size_t bytes, int after = -1) {
    return add(transport::Op::recv(peer, data, bytes, after));
  }
  int recvReduce(int peer, void* data, std::size_t bytes, DataType dtype, ReduceOp op,
                 const void* other = nullptr, int after = -1) {
    return add(transport::Op::recvReduce(peer, data, bytes, dtype, op, other, after));
  }
  // Runs every op added so far and starts a new, empty list (indices restart at 0).
  void run(Context& c) {
    if (!ops_.empty()) c.run(ops_);
    ops_.clear();
  }

 private:
  int add(const transport::Op& op) {
    if (op.bytes == 0) return -1;
    ops_.push_back(op);
    return static_cast<int>(ops_.size()) - 1;
  }
  std::vector<transport::Op> ops_;
};

inline std::byte* bytePtr(void* p) {
  return static_cast<std::byte*>(p);
}
inline const std::byte* bytePtr(const void* p) {
  return static_cast<const std::byte*>(p);
}

// Copies n bytes unless dst and src are the same buffer (the in-place case).
inline void copyUnlessSame(void* dst, const void* src, std::size_t n) {
  if (dst != src && n > 0) std::memcpy(dst, src, n);
}

// (a mod p) for possibly negative a.
inline int wrap(int a, int p) {
  return ((a % p) + p) % p;
}

// The two halves of the ring allreduce (allreduce_ring.cc), for algorithms built on them.
// addRingReduceScatter adds the p-1 steps after which rank r holds in dst the reduction of block
// ringOwnedBlock(r, p) of `blocks` (src op every rank's), computed only there, and returns the op
// that produced it (the allgather's first send may wait on it byte by byte; -1 once run).
// addRingAllgather adds the p-1 steps that pass every owned block of dst on to every rank.
inline int ringOwnedBlock(int rank, int p) {
  return wrap(rank + 1, p);
}
int addRingReduceScatter(OpList& ops, const Context& c, const std::byte* src, std::byte* dst,
                         const Blocks& blocks, DataType t, ReduceOp op);
void addRingAllgather(OpList& ops, const Context& c, std::byte* dst, const Blocks& blocks, int produced);

}  // namespace gyre::collectives
