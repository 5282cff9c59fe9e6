// Linear scatter: the root posts all p-1 sends at once (block r of its input to rank r) and
// copies its own block locally; every other rank receives its block.
//
// Root: p-1 messages, (p-1)·bytes sent; the others: one message of `bytes`.
// T = (p-1)·α + (p-1)·bytes·β at the root, whose link is the bottleneck.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"

namespace gyre::collectives {

void scatterLinear(Context& c, const void* in, void* out, std::size_t bytes, int root) {
  const int p = c.size();
  const int r = c.rank();
  OpList ops;
  if (r != root) {
    ops.recv(root, out, bytes);
    ops.run(c);
    return;
  }
  const std::byte* src = bytePtr(in);
  for (int peer = 0; peer < p; ++peer)
    if (peer != root) ops.send(peer, src + static_cast<std::size_t>(peer) * bytes, bytes);
  copyUnlessSame(out, src + static_cast<std::size_t>(root) * bytes, bytes);
  ops.run(c);
}

}  // namespace gyre::collectives
