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
  if (topo->uniform()) return blockwise(c, *topo, in, out, count, t, op);
  throughLeaders(c, *topo, in, out, count, t, op);
}

}  // namespace gyre::collectives
