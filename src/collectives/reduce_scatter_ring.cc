// Ring reduce-scatter: `in` holds p blocks of `count` elements; rank r ends with the reduction of
// every rank's block r.
//
// With right = r+1 and left = r-1, step s = 0..p-2: send block r-s-1 to right (step 0 straight
// from the input, later the partial reduced in the step before), receive block r-s-2 from left
// and reduce it with the local input block: partial = in[b] (op) received. The last step's block
// is r itself and is reduced straight into `out`; the p-2 intermediate partials live in scratch.
// One op list: each send names the reduce that produced its block as `after` (byte-granular),
// so the ring is pipelined chunk by chunk. kAverage: out is divided once at the end.
//
// Per rank, for blocks of m bytes: p-1 messages, (p-1)·m bytes sent and received, (p-1)·m bytes
// reduced. T = (p-1)·α + (p-1)·m·β + (p-1)·m·γ.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {

void reduceScatterRing(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op) {
  const int p = c.size();
  const int r = c.rank();
  const std::size_t block = count * dtypeSize(t);
  if (count == 0) return;
  if (p == 1) {
    copyUnlessSame(out, in, block);
    return;
  }
  const int right = wrap(r + 1, p);
  const int left = wrap(r - 1, p);
  const std::byte* src = bytePtr(in);
  std::byte* partials = p > 2 ? bytePtr(c.scratch.get(static_cast<std::size_t>(p - 2) * block)) : nullptr;
  OpList ops;

  int produced = -1;
  for (int s = 0; s < p - 1; ++s) {
    const std::size_t sb = static_cast<std::size_t>(wrap(r - s - 1, p));
    const std::size_t rb = static_cast<std::size_t>(wrap(r - s - 2, p));
    const std::byte* sendFrom =
        s == 0 ? src + sb * block : partials + static_cast<std::size_t>(s - 1) * block;
    ops.send(right, sendFrom, block, produced);
    void* into = s == p - 2 ? out : partials + static_cast<std::size_t>(s) * block;
    produced = ops.recvReduce(left, into, block, t, op, src + rb * block);
  }
  ops.run(c);
  if (op == ReduceOp::kAverage) reduce::divide(t, out, count, static_cast<std::size_t>(p));
}

}  // namespace gyre::collectives
