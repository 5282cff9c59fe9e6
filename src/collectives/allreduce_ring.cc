// Ring allreduce: a ring reduce-scatter followed by a ring allgather, chunked and pipelined.
//
// The vector is cut into p blocks on element boundaries (the first count % p hold one element
// more; empty blocks when count < p send nothing). With right = r+1 and left = r-1:
//   reduce-scatter, step s = 0..p-2: send block r-s to right (step 0 straight from the input),
//     receive block r-s-1 from left and reduce it: out[b] = in[b] (op) received. After p-1
//     steps rank r holds the full reduction of block r+1, computed only there.
//   allgather, step s = 0..p-2: send block r+1-s to right, receive block r-s from left.
// All 2(p-1) steps are one op list: every send names the op that produced its block as `after`,
// and `after` is byte-granular, so a chunk travels on as soon as it is reduced. The out-of-place
// reduce reads the input block as its left operand, so no input is copied to the output first.
// kAverage: the owner divides its block once between the two halves (two runs), so every rank
// receives the same quotient.
//
// Per rank, for n bytes: 2(p-1) messages, 2(p-1)/p·n bytes sent and received, (p-1)/p·n bytes
// reduced. T = 2(p-1)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ.
#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {

int addRingReduceScatter(OpList& ops, const Context& c, const std::byte* src, std::byte* dst,
                         const Blocks& blocks, DataType t, ReduceOp op) {
  const int p = c.size();
  const int r = c.rank();
  const int right = wrap(r + 1, p);
  const int left = wrap(r - 1, p);
  int produced = -1;  // the op that last wrote the block sent next
  for (int s = 0; s < p - 1; ++s) {
    const int sb = wrap(r - s, p);
    const int rb = wrap(r - s - 1, p);
    ops.send(right, (s == 0 ? src : dst) + blocks.offset(sb), blocks.bytes(sb), s == 0 ? -1 : produced);
    produced =
        ops.recvReduce(left, dst + blocks.offset(rb), blocks.bytes(rb), t, op, src + blocks.offset(rb));
  }
  return produced;
}

void addRingAllgather(OpList& ops, const Context& c, std::byte* dst, const Blocks& blocks, int produced) {
  const int p = c.size();
  const int r = c.rank();
  const int right = wrap(r + 1, p);
  const int left = wrap(r - 1, p);
  for (int s = 0; s < p - 1; ++s) {
    const int sb = wrap(r + 1 - s, p);
    const int rb = wrap(r - s, p);
    ops.send(right, dst + blocks.offset(sb), blocks.bytes(sb), produced);
    produced = ops.recv(left, dst + blocks.offset(rb), blocks.bytes(rb));
  }
}

void allreduceRing(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op) {
  const int p = c.size();
  const std::size_t es = dtypeSize(t);
  if (count == 0) return;
  if (p == 1) {
    copyUnlessSame(out, in, count * es);
    return;
  }
  const Blocks blocks(count, p, es);
  std::byte* dst = bytePtr(out);
  OpList ops;
  int produced = addRingReduceScatter(ops, c, bytePtr(in), dst, blocks, t, op);
  if (op == ReduceOp::kAverage) {
    ops.run(c);
    const int owned = ringOwnedBlock(c.rank(), p);
    reduce::divide(t, dst + blocks.offset(owned), blocks.count(owned), static_cast<std::size_t>(p));
    produced = -1;
  }
  addRingAllgather(ops, c, dst, blocks, produced);
  ops.run(c);
}

}  // namespace gyre::collectives
