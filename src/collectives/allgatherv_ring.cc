// Ring allgather of variable blocks: rank r contributes bytes[r] bytes (possibly none), which
// land at offsets[r] of every rank's output.
//
// The own block is copied into place (unless in place). Then, with right = r+1 and left = r-1,
// step s = 0..p-2: send block r-s to right (step 0 straight from the input), receive block
// r-s-1 from left. One op list; each forwarded block names its receive as `after`, so a block
// moves on chunk by chunk as it arrives. Empty blocks are skipped by both ends.
//
// Per rank, with N = the sum of all blocks: p-1 messages, about N - bytes[r] bytes received and
// N - bytes[r+1] sent (equal blocks: (p-1)/p·N). T = (p-1)·α + (p-1)/p·N·β.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/check.h"

namespace gyre::collectives {

void allgathervRing(Context& c, const void* in, void* out, std::span<const std::size_t> bytes,
                    std::span<const std::size_t> offsets) {
  const int p = c.size();
  const int r = c.rank();
  GYRE_ENFORCE_EQ(bytes.size(), static_cast<std::size_t>(p), "allgatherv block sizes");
  GYRE_ENFORCE_EQ(offsets.size(), static_cast<std::size_t>(p), "allgatherv block offsets");
  std::byte* dst = bytePtr(out);
  auto at = [&](int b) { return dst + offsets[static_cast<std::size_t>(b)]; };
  auto size = [&](int b) { return bytes[static_cast<std::size_t>(b)]; };
  copyUnlessSame(at(r), in, size(r));
  if (p == 1) return;
  const int right = wrap(r + 1, p);
  const int left = wrap(r - 1, p);
  OpList ops;
  int arrived = -1;
  for (int s = 0; s < p - 1; ++s) {
    const int sb = wrap(r - s, p);
    const int rb = wrap(r - s - 1, p);
    ops.send(right, s == 0 ? in : at(sb), size(sb), arrived);
    arrived = ops.recv(left, at(rb), size(rb));
  }
  ops.run(c);
}

}  // namespace gyre::collectives
