// Recursive halving-doubling allreduce (Rabenseifner) for any p, with recursive doubling of the
// whole vector for small messages.
//
// Fold (when p is not a power of two), as MPICH does: let p' be the largest power of two <= p
// and rem = p - p'. Each even rank r < 2·rem sends its vector to r+1, which reduces it
// (out = in[r+1] op in[r]); the even ranks then sit out and get the result back from r+1 at the
// end. The p' remaining ranks are renumbered 0..p'-1.
//
// Large messages (Rabenseifner): the vector is cut into p' blocks on element boundaries.
//   reduce-scatter by recursive halving, distance p'/2, p'/4, ..., 1: each rank sends the half
//     of its current block range that its partner (rank XOR distance) keeps and receive-reduces
//     the half it keeps; at the end rank k holds block k, reduced only there.
//   allgather by recursive doubling, distance 1, 2, ..., p'/2: exchange whole ranges.
// Everything, fold included, is one op list at block granularity (each block is its own
// message, also in the fold): each op names the op that last wrote its block as `after`
// (byte-granular), so steps overlap chunk by chunk. kAverage: the owner divides its block once
// between the two halves (two runs).
// Small messages (useRecursiveDoubling: when the cost model, or its typical() terms while it is
// not calibrated, predicts it faster, about 30-80 KiB; always when count < p'): log2 p' steps that exchange
// the whole vector with the partner at distance 1, 2, ..., p'/2, one run per step. Both partners compute
// (lower group op upper group) (the upper one reduces locally with the received vector as left operand), so
// every rank holds the same bits; kAverage divides the identical sum on every rank.
//
// Per rank, for n bytes, with f = 1 when p is not a power of two (fold: 2α + 2nβ + nγ):
//   Rabenseifner: 2·log2 p' messages, 2(p'-1)/p'·n bytes each way, (p'-1)/p'·n reduced.
//     T = 2·log2 p'·α + 2(p'-1)/p'·n·β + (p'-1)/p'·n·γ + f·(2α + 2nβ + nγ).
//   Recursive doubling: T = log2 p'·(α + n·β + n·γ) + f·(2α + 2nβ + nγ).
#include <algorithm>
#include <bit>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/cost_model.h"
#include "collectives/op_list.h"
#include "common/reduce.h"

namespace gyre::collectives {
namespace {

// The power-of-two group left after folding: p = p2 + rem.
struct Fold {
  explicit Fold(int p) : p2(std::bit_floor(static_cast<unsigned>(p))), rem(p - p2) {}
  int p2;
  int rem;
  // Rank in the group, or -1 for an even rank r < 2·rem that sits out.
  int groupRank(int r) const {
    if (r >= 2 * rem) return r - rem;
    return r % 2 == 0 ? -1 : r / 2;
  }
  int realRank(int g) const { return g < rem ? 2 * g + 1 : g + rem; }
  bool folded(int r) const { return r < 2 * rem; }
};

void recursiveDoubling(Context& c, const Fold& fold, const void* in, void* out, std::size_t count, DataType t,
                       ReduceOp op) {
  const int r = c.rank();
  const int g = fold.groupRank(r);
  const std::size_t n = count * dtypeSize(t);
  OpList ops;
  if (g < 0) {
    const int sent = ops.send(r + 1, in, n);
    ops.recv(r + 1, out, n, sent);
    ops.run(c);
    return;
  }
  if (fold.folded(r)) {
    ops.recvReduce(r - 1, out, n, t, op, in);
    ops.run(c);
  } else {
    copyUnlessSame(out, in, n);
  }
  void* received = nullptr;
  for (int distance = 1; distance < fold.p2; distance *= 2) {
    const int partner = fold.realRank(g ^ distance);
    const int sent = ops.send(partner, out, n);
    if ((g & distance) == 0) {
      ops.recvReduce(partner, out, n, t, op, nullptr, sent);  // out = out (op) received
      ops.run(c);
    } else {
      if (received == nullptr) received = c.scratch.get(n);
      ops.recv(partner, received, n);
      ops.run(c);
      reduce::apply(t, op, out, received, out, count);  // out = received (op) out
    }
  }
  if (op == ReduceOp::kAverage) reduce::divide(t, out, count, static_cast<std::size_t>(c.size()));
  if (fold.folded(r)) {
    ops.send(r - 1, out, n);
    ops.run(c);
  }
}

void rabenseifner(Context& c, const Fold& fold, const void* in, void* out, std::size_t count, DataType t,
                  ReduceOp op) {
  const int r = c.rank();
  const int g = fold.groupRank(r);
  OpList ops;
  const Blocks blocks(count, fold.p2, dtypeSize(t));
  const std::byte* src = bytePtr(in);
  std::byte* dst = bytePtr(out);
  if (g < 0) {
    // Block by block, as the partner receives and returns them: every op is one message. A
    // block comes back into `out` only after it left from `in` (they may be the same memory).
    std::vector<int> sent(static_cast<std::size_t>(fold.p2));
    for (int b = 0; b < fold.p2; ++b)
      sent[static_cast<std::size_t>(b)] = ops.send(r + 1, src + blocks.offset(b), blocks.bytes(b));
    for (int b = 0; b < fold.p2; ++b)
      ops.recv(r + 1, dst + blocks.offset(b), blocks.bytes(b), sent[static_cast<std::size_t>(b)]);
    ops.run(c);
    return;
  }
  const auto b2 = static_cast<std::size_t>(fold.p2);
  std::vector<int> writer(b2, -1);       // the op that last wrote out's block b in this list
  std::vector<bool> written(b2, false);  // out's block b holds a partial (else read in's)
  auto at = [&](int b) { return dst + blocks.offset(b); };
  auto source = [&](int b) -> const void* {
    return written[static_cast<std::size_t>(b)] ? at(b) : src + blocks.offset(b);
  };
  auto reduceInto = [&](int peer, int b) {
    const auto i = static_cast<std::size_t>(b);
    writer[i] = ops.recvReduce(peer, at(b), blocks.bytes(b), t, op, source(b), writer[i]);
    written[i] = true;
  };

  if (fold.folded(r))
    for (int b = 0; b < fold.p2; ++b) reduceInto(r - 1, b);
  int lo = 0;
  for (int distance = fold.p2 / 2; distance >= 1; distance /= 2) {
    const int partner = fold.realRank(g ^ distance);
    const int keep = (g & distance) != 0 ? lo + distance : lo;
    const int give = (g & distance) != 0 ? lo : lo + distance;
    for (int b = give; b < give + distance; ++b)
      ops.send(partner, source(b), blocks.bytes(b), writer[static_cast<std::size_t>(b)]);
    for (int b = keep; b < keep + distance; ++b) reduceInto(partner, b);
    lo = keep;
  }
  if (op == ReduceOp::kAverage) {
    ops.run(c);
    reduce::divide(t, at(g), blocks.count(g), static_cast<std::size_t>(c.size()));
    std::fill(writer.begin(), writer.end(), -1);
  }
  for (int distance = 1; distance < fold.p2; distance *= 2) {
    const int partner = fold.realRank(g ^ distance);
    const int theirs = lo ^ distance;
    for (int b = lo; b < lo + distance; ++b)
      ops.send(partner, at(b), blocks.bytes(b), writer[static_cast<std::size_t>(b)]);
    for (int b = theirs; b < theirs + distance; ++b)
      writer[static_cast<std::size_t>(b)] = ops.recv(partner, at(b), blocks.bytes(b));
    lo = std::min(lo, theirs);
  }
  if (fold.folded(r))
    for (int b = 0; b < fold.p2; ++b)
      ops.send(r - 1, at(b), blocks.bytes(b), writer[static_cast<std::size_t>(b)]);
  ops.run(c);
}

}  // namespace

void allreduceRecursiveDoubling(Context& c, const void* in, void* out, std::size_t count, DataType t,
                                ReduceOp op) {
  if (count == 0) return;
  if (c.size() == 1) return copyUnlessSame(out, in, count * dtypeSize(t));
  recursiveDoubling(c, Fold(c.size()), in, out, count, t, op);
}

void allreduceRabenseifner(Context& c, const void* in, void* out, std::size_t count, DataType t,
                           ReduceOp op) {
  if (count == 0) return;
  if (c.size() == 1) return copyUnlessSame(out, in, count * dtypeSize(t));
  rabenseifner(c, Fold(c.size()), in, out, count, t, op);
}

void allreduceHalvingDoubling(Context& c, const void* in, void* out, std::size_t count, DataType t,
                              ReduceOp op) {
  if (useRecursiveDoubling(c.cost, count * dtypeSize(t), count, c.size()))
    allreduceRecursiveDoubling(c, in, out, count, t, op);
  else
    allreduceRabenseifner(c, in, out, count, t, op);
}

}  // namespace gyre::collectives
