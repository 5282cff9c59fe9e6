// Naive ("driver") allreduce: every rank sends its vector to rank 0, which reduces them in rank
// order and sends the result back.
//
// Rank 0 posts p-1 receive-reduces into `out` (the first with the input as its left operand),
// each chained to the one before with `after`, so the reduction order is fixed:
// ((in0 op in1) op in2) ... ; then one send per peer, each after the last reduce, so the result
// streams back chunk by chunk while later chunks are still being reduced. Every other rank
// sends its input and receives the result in one op list. kAverage: rank 0 divides between its
// reduce and its sends (two runs).
//
// Rank 0, for n bytes: 2(p-1) messages, (p-1)·n bytes received, reduced and sent; the others
// send and receive n. T = 2(p-1)·α + 2(p-1)·n·β + (p-1)·n·γ (rank 0's link is the bottleneck).
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {

void allreduceNaive(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op) {
  const int p = c.size();
  const std::size_t n = count * dtypeSize(t);
  if (count == 0) return;
  if (p == 1) {
    copyUnlessSame(out, in, n);
    return;
  }
  OpList ops;
  if (c.rank() != 0) {
    const int sent = ops.send(0, in, n);
    ops.recv(0, out, n, sent);  // in place: a byte is overwritten only after it has left
    ops.run(c);
    return;
  }
  int reduced = -1;
  for (int peer = 1; peer < p; ++peer)
    reduced = ops.recvReduce(peer, out, n, t, op, peer == 1 ? in : nullptr, reduced);
  if (op == ReduceOp::kAverage) {
    ops.run(c);
    reduce::divide(t, out, count, static_cast<std::size_t>(p));
    reduced = -1;
  }
  for (int peer = 1; peer < p; ++peer) ops.send(peer, out, n, reduced);
  ops.run(c);
}

}  // namespace gyre::collectives
