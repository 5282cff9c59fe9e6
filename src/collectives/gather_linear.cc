// Linear gather: every rank sends its `bytes` to the root, which posts all p-1 receives at once
// (straight into their places in `out`) and copies its own block locally.
//
// Root: p-1 messages, (p-1)·bytes received; the others: one message of `bytes`.
// T = (p-1)·α + (p-1)·bytes·β at the root, whose link is the bottleneck.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"

namespace gyre::collectives {

void gatherLinear(Context& c, const void* in, void* out, std::size_t bytes, int root) {
  const int p = c.size();
  const int r = c.rank();
  OpList ops;
  if (r != root) {
    ops.send(root, in, bytes);
    ops.run(c);
    return;
  }
  std::byte* dst = bytePtr(out);
  for (int peer = 0; peer < p; ++peer)
    if (peer != root) ops.recv(peer, dst + static_cast<std::size_t>(peer) * bytes, bytes);
  copyUnlessSame(dst + static_cast<std::size_t>(root) * bytes, in, bytes);
  ops.run(c);
}

}  // namespace gyre::collectives
