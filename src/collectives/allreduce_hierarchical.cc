// Hierarchical allreduce: reduce inside each host, allreduce across hosts, spread inside each host.
//
// On H hosts of L ranks each (collectives/topology.h), with n bytes:
//   1. inside each host, a ring reduce-scatter over L blocks: local rank i ends with the host's
//      reduction of block i+1 (mod L);
//   2. the L groups of ranks with the same local index, one rank per host, each allreduce their
//      block across hosts, by the algorithm the group's own cost model chooses (calibrated on
//      that group: its links are the ones between hosts), all L groups at once;
//   3. inside each host, a ring allgather of the L blocks.
// Each host sends 2(H-1)/H·n bytes across (ring or Rabenseifner among hosts), against the flat
// ring's 2(p-1)/p·n over every host's busiest link when its ranks sit together in rank order:
// for 2 hosts of 2 ranks, n against 1.5n. The bound among hosts of bandwidth B is 2(H-1)/H·n/B.
// Inside a host (shared memory) each rank moves 2(L-1)/L·n bytes.
// When the hosts have different numbers of ranks, the phases are: a tree reduce to each host's
// first rank, an allreduce among those leaders, a broadcast from each leader inside its host.
// kAverage reduces with kSum and divides once, by the world size, after the phase across hosts.
// On one host, or with every host holding one rank, this is the ring.
//
// Overlapped (every host as many ranks, n ≥ kOverlapBytes): the three phases are one op list, so
// they overlap chunk by chunk instead of running one after the other. Every block of the host's
// ring is cut into H sub-blocks, each its own message, and the phase across hosts is a ring over
// the owned block's H sub-blocks: its first send of a sub-block waits (byte by byte, the ops'
// `after`) for the host's reduce-scatter to finish that sub-block, and the host's allgather sends
// each sub-block as soon as the ring across hosts has it whole. The bytes are those above (the
// ring across hosts is bandwidth-optimal among hosts); the shared-memory phases now hide behind the
// links between hosts instead of adding to them. Messages per rank: H·2(L-1) inside the host,
// 2(H-1) across. kAverage divides the whole result once at the end.
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/op_list.h"
#include "collectives/topology.h"
#include "common/reduce.h"

namespace gyre::collectives {
namespace {

void divideByWorld(Context& c, void* data, std::size_t count, DataType t) {
  reduce::divide(t, data, count, static_cast<std::size_t>(c.size()));
}

// Every host as many ranks, more than one (a layered topology): each rank carries one block
// across hosts.
void blockwise(Context& c, Topology& topo, const void* in, void* out, std::size_t count, DataType t,
               ReduceOp op) {
  const ReduceOp partial = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  Context host = c.within(topo.hosts[topo.host], c.cost);
  const Blocks blocks(count, host.size(), dtypeSize(t));
  std::byte* dst = bytePtr(out);
  OpList ops;
  addRingReduceScatter(ops, host, bytePtr(in), dst, blocks, t, partial);
  ops.run(host);
  const int owned = ringOwnedBlock(host.rank(), host.size());
  std::byte* block = dst + blocks.offset(owned);
  if (blocks.count(owned) > 0) {  // the same count on every rank of the group across hosts
    Context across = c.within(topo.across, topo.acrossCost);
    allreduceBy(AllreduceAlgorithm::kAuto, across, block, block, blocks.count(owned), t, partial);
    if (op == ReduceOp::kAverage) divideByWorld(c, block, blocks.count(owned), t);
  }
  addRingAllgather(ops, host, dst, blocks, -1);
  ops.run(host);
}

// From this many bytes the phases overlap (fusedBlockwise); below, separate phases, whose
// allreduce across hosts the cost model chooses, cost fewer messages.
constexpr std::size_t kOverlapBytes = std::size_t{2} << 20;

// The overlapped blockwise allreduce (the header's last paragraph), on the world's ranks.
void fusedBlockwise(Context& c, Topology& topo, const void* in, void* out, std::size_t count, DataType t,
                    ReduceOp op) {
  const ReduceOp partial = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  const std::vector<int>& host = topo.hosts[topo.host];
  const int L = static_cast<int>(host.size());
  const int H = static_cast<int>(topo.across.size());
  const int i = topo.local, a = topo.host;
  const int right = host[static_cast<std::size_t>(wrap(i + 1, L))];
  const int left = host[static_cast<std::size_t>(wrap(i - 1, L))];
  const int rightAcross = topo.across[static_cast<std::size_t>(wrap(a + 1, H))];
  const int leftAcross = topo.across[static_cast<std::size_t>(wrap(a - 1, H))];
  const std::size_t es = dtypeSize(t);
  const Blocks blocks(count, L, es);
  auto sub = [&](int block) { return Blocks(blocks.count(block), H, es); };
  const std::byte* src = bytePtr(in);
  std::byte* dst = bytePtr(out);
  OpList ops;
  // Inside the host, reduce-scatter: produced[q], the op that last wrote sub-block q of the block
  // this rank sends next.
  std::vector<int> produced(static_cast<std::size_t>(H), -1);
  for (int s = 0; s < L - 1; ++s) {
    const int sb = wrap(i - s, L), rb = wrap(i - s - 1, L);
    const Blocks ssb = sub(sb), srb = sub(rb);
    for (int q = 0; q < H; ++q)
      ops.send(right, (s == 0 ? src : dst) + blocks.offset(sb) + ssb.offset(q), ssb.bytes(q),
               s == 0 ? -1 : produced[static_cast<std::size_t>(q)]);
    for (int q = 0; q < H; ++q)
      produced[static_cast<std::size_t>(q)] =
          ops.recvReduce(left, dst + blocks.offset(rb) + srb.offset(q), srb.bytes(q), t, partial,
                         src + blocks.offset(rb) + srb.offset(q));
  }
  // Across hosts, a ring over the owned block's sub-blocks, each step waiting for what it reads.
  const int owned = ringOwnedBlock(i, L);
  const Blocks so = sub(owned);
  std::byte* block = dst + blocks.offset(owned);
  if (L == 1) copyUnlessSame(block, src + blocks.offset(owned), blocks.bytes(owned));
  std::vector<int>& ready = produced;  // ready[q]: the op after which sub-block q holds what is sent next
  for (int s = 0; s < H - 1; ++s) {
    const int sq = wrap(a - s, H), rq = wrap(a - s - 1, H);
    ops.send(rightAcross, block + so.offset(sq), so.bytes(sq), ready[static_cast<std::size_t>(sq)]);
    ready[static_cast<std::size_t>(rq)] = ops.recvReduce(leftAcross, block + so.offset(rq), so.bytes(rq), t, partial,
                                                         nullptr, ready[static_cast<std::size_t>(rq)]);
  }
  for (int s = 0; s < H - 1; ++s) {
    const int sq = wrap(a + 1 - s, H), rq = wrap(a - s, H);
    ops.send(rightAcross, block + so.offset(sq), so.bytes(sq), ready[static_cast<std::size_t>(sq)]);
    ready[static_cast<std::size_t>(rq)] = ops.recv(leftAcross, block + so.offset(rq), so.bytes(rq));
  }
  // Inside the host, allgather: each sub-block goes on as soon as it is final here.
  for (int s = 0; s < L - 1; ++s) {
    const int sb = wrap(i + 1 - s, L), rb = wrap(i - s, L);
    const Blocks ssb = sub(sb), srb = sub(rb);
    for (int q = 0; q < H; ++q)
      ops.send(right, dst + blocks.offset(sb) + ssb.offset(q), ssb.bytes(q), ready[static_cast<std::size_t>(q)]);
    for (int q = 0; q < H; ++q)
      ready[static_cast<std::size_t>(q)] = ops.recv(left, dst + blocks.offset(rb) + srb.offset(q), srb.bytes(q));
  }
  ops.run(c);
  if (op == ReduceOp::kAverage) divideByWorld(c, dst, count, t);
}

// Hosts of different sizes: the first rank of each host speaks for it.
void throughLeaders(Context& c, Topology& topo, const void* in, void* out, std::size_t count, DataType t,
                    ReduceOp op) {
  const ReduceOp partial = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  Context host = c.within(topo.hosts[topo.host], c.cost);
  reduceTree(host, in, out, count, t, partial, 0);
  if (topo.local == 0) {
    Context across = c.within(topo.across, topo.acrossCost);
    allreduceBy(AllreduceAlgorithm::kAuto, across, out, out, count, t, partial);
    if (op == ReduceOp::kAverage) divideByWorld(c, out, count, t);
  }
  broadcastBy(BroadcastAlgorithm::kAuto, host, out, count * dtypeSize(t), 0);
}

}  // namespace

void allreduceHierarchical(Context& c, const void* in, void* out, std::size_t count, DataType t,
                           ReduceOp op) {
  if (count == 0) return;
  Topology* topo = c.topology;
  if (topo == nullptr || !c.members.empty() || !topo->layered())
    return allreduceRing(c, in, out, count, t, op);
  if (topo->uniform()) {
    if (count * dtypeSize(t) >= kOverlapBytes) return fusedBlockwise(c, *topo, in, out, count, t, op);
    return blockwise(c, *topo, in, out, count, t, op);
  }
  throughLeaders(c, *topo, in, out, count, t, op);
}

}  // namespace gyre::collectives
