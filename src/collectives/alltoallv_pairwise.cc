// Pairwise-exchange alltoall(v): at step s = 1..p-1 rank r sends its block for r+s and receives
// the block from r-s; the own block is copied locally.
//
// Every step pairs each rank with a different partner, so all p-1 steps go into one op list,
// in step order: the mesh progresses them all at once (no lock-step between steps) and a
// transport that serves ops in list order follows the pairwise schedule, in which no rank is
// the target of two senders in the same step. Empty blocks are skipped by both ends.
//
// Per rank, with blocks of m bytes: p-1 messages each way, (p-1)·m bytes sent and received.
// T = (p-1)·α + (p-1)·m·β.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/check.h"

namespace gyre::collectives {

void alltoallvPairwise(Context& c, const void* in, std::span<const std::size_t> sendBytes,
                       std::span<const std::size_t> sendOffsets, void* out,
                       std::span<const std::size_t> recvBytes, std::span<const std::size_t> recvOffsets) {
  const int p = c.size();
  const auto r = static_cast<std::size_t>(c.rank());
  const auto size = static_cast<std::size_t>(p);
  GYRE_ENFORCE_EQ(sendBytes.size(), size, "alltoallv send sizes");
  GYRE_ENFORCE_EQ(sendOffsets.size(), size, "alltoallv send offsets");
  GYRE_ENFORCE_EQ(recvBytes.size(), size, "alltoallv receive sizes");
  GYRE_ENFORCE_EQ(recvOffsets.size(), size, "alltoallv receive offsets");
  GYRE_ENFORCE_EQ(sendBytes[r], recvBytes[r], "alltoallv: the block a rank keeps must fit itself");
  const std::byte* src = bytePtr(in);
  std::byte* dst = bytePtr(out);
  OpList ops;
  for (int s = 1; s < p; ++s) {
    const auto to = static_cast<std::size_t>(wrap(c.rank() + s, p));
    const auto from = static_cast<std::size_t>(wrap(c.rank() - s, p));
    ops.send(static_cast<int>(to), src + sendOffsets[to], sendBytes[to]);
    ops.recv(static_cast<int>(from), dst + recvOffsets[from], recvBytes[from]);
  }
  copyUnlessSame(dst + recvOffsets[r], src + sendOffsets[r], sendBytes[r]);
  ops.run(c);
}

}  // namespace gyre::collectives
