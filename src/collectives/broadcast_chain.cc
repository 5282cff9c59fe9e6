// Pipelined chain broadcast from any root.
//
// Ranks are renumbered v = (r - root) mod p; v receives from v-1 and forwards to v+1. Each rank
// posts its receive and its send in one op list, the send `after` the receive: byte-granular,
// so every byte leaves as soon as it has arrived and all p-1 links carry the buffer at once.
//
// Per rank, for n bytes: one message in, one out; n bytes each way. Pipelined in segments of S
// bytes: T ≈ (p - 2 + n/S)·(α + S·β), about (p-1)·α + n·β for large n; the best bandwidth of
// any broadcast, at a latency linear in p.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"

namespace gyre::collectives {

void broadcastChain(Context& c, void* buf, std::size_t bytes, int root) {
  const int p = c.size();
  if (p == 1 || bytes == 0) return;
  const int v = wrap(c.rank() - root, p);
  OpList ops;
  int arrived = -1;
  if (v != 0) arrived = ops.recv(wrap(v - 1 + root, p), buf, bytes);
  if (v != p - 1) ops.send(wrap(v + 1 + root, p), buf, bytes, arrived);
  ops.run(c);
}

}  // namespace gyre::collectives
