// Binary-tree reduce to any root, pipelined.
//
// Ranks are renumbered v = (r - root) mod p so the root is 0, then laid out as a heap: parent
// (v-1)/2, children 2v+1 and 2v+2. Each rank posts, in one op list: receive-reduce from its
// first child (left operand: the input), receive-reduce from its second child after the first
// (fixed order: (in op c1) op c2), and a send of the partial (a leaf sends its input) to its
// parent after the last reduce. Partials of inner ranks live in scratch; the root reduces into
// `out`. `after` is byte-granular, so chunks climb the tree as soon as they are reduced.
// kAverage: the root divides once at the end.
//
// Inner rank, for n bytes: 3 messages, 2n bytes received and reduced, n sent. With depth
// d = floor(log2 p), pipelined in segments of S bytes (k = n/S):
// T ≈ (d + k - 1)·(α + S·(2β + 2γ)), about d·α + 2n·(β + γ) for large n.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {

void reduceTree(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op, int root) {
  const int p = c.size();
  const int v = wrap(c.rank() - root, p);
  const std::size_t n = count * dtypeSize(t);
  if (count == 0) return;
  if (p == 1) {
    copyUnlessSame(out, in, n);
    return;
  }
  const int children[2] = {2 * v + 1, 2 * v + 2};
  void* into = v == 0 ? out : (children[0] < p ? c.scratch.get(n) : nullptr);
  OpList ops;
  int reduced = -1;
  const void* partial = in;
  for (int child : children) {
    if (child >= p) break;
    reduced = ops.recvReduce(wrap(child + root, p), into, n, t, op, partial, reduced);
    partial = into;
  }
  if (v != 0) ops.send(wrap((v - 1) / 2 + root, p), partial, n, reduced);
  ops.run(c);
  if (v == 0 && op == ReduceOp::kAverage) reduce::divide(t, out, count, static_cast<std::size_t>(p));
}

}  // namespace gyre::collectives
