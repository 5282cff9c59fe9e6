// Binary-tree allreduce: a pipelined reduce up a binary tree to rank 0, then a pipelined
// broadcast down the same tree.
//
// Heap layout: rank r's parent is (r-1)/2, its children 2r+1 and 2r+2 (when < p); depth
// d = floor(log2 p). Each rank posts, in one op list: receive-reduce from its first child into
// `out` (left operand: the input), receive-reduce from the second child after the first (fixed
// order: (in op c1) op c2), send `out` (or, for a leaf, `in`) to its parent after the last
// reduce, receive the result from its parent after that send (in place safe), and send it to
// its children after that receive. Every `after` is byte-granular, so both halves stream chunk
// by chunk and the up and down streams overlap. The result is reduced only at rank 0 and copied
// everywhere, so every rank holds the same bits. kAverage: rank 0 divides between reducing and
// broadcasting (two runs there, so the halves no longer overlap).
//
// Inner rank, for n bytes: up to 6 messages, 2n bytes received and reduced going up, n sent up,
// n received and 2n sent going down: 3n in and 3n out, which overlap (full duplex). Pipelined in
// segments of S bytes (k = n/S segments): T ≈ (2d + k - 1)·(α + S·(3β + 2γ)), about
// 2d·α + n·(3β + 2γ) for large n.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {

void allreduceTree(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op) {
  const int p = c.size();
  const int r = c.rank();
  const std::size_t n = count * dtypeSize(t);
  if (count == 0) return;
  if (p == 1) {
    copyUnlessSame(out, in, n);
    return;
  }
  const int children[2] = {2 * r + 1, 2 * r + 2};
  OpList ops;
  int reduced = -1;
  const void* partial = in;
  for (int child : children) {
    if (child >= p) break;
    reduced = ops.recvReduce(child, out, n, t, op, partial, reduced);  // partial: in, then out itself
    partial = out;
  }
  int result = reduced;
  if (r != 0) {
    const int parent = (r - 1) / 2;
    const int sent = ops.send(parent, partial, n, reduced);
    result = ops.recv(parent, out, n, sent);
  } else if (op == ReduceOp::kAverage) {
    ops.run(c);
    reduce::divide(t, out, count, static_cast<std::size_t>(p));
    result = -1;
  }
  for (int child : children)
    if (child < p) ops.send(child, out, n, result);
  ops.run(c);
}

}  // namespace gyre::collectives
