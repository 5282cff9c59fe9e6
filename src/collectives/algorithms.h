// Every collective algorithm, one per file. Callers (collectives/dispatch.cc) have validated the
// arguments; counts are in elements of `dtype`. Buffers may be in place as documented in
// include/gyre/communicator.h. Each file starts with the algorithm's steps and bytes on the wire;
// docs/algorithms.md collects them.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/context.h"
#include "gyre/types.h"

namespace gyre::collectives {

// allreduce: output = reduction of every rank's input (count elements). kAverage divides once.
void allreduceNaive(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);
void allreduceRing(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);
// Runs allreduceRecursiveDoubling or allreduceRabenseifner, as useRecursiveDoubling(c.cost, ...)
// says (both in allreduce_halving_doubling.cc). Every rank must hold the same c.cost.
void allreduceHalvingDoubling(Context& c, const void* in, void* out, std::size_t count, DataType t,
                              ReduceOp op);
void allreduceRecursiveDoubling(Context& c, const void* in, void* out, std::size_t count, DataType t,
                                ReduceOp op);
void allreduceRabenseifner(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);
void allreduceTree(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);
// Reduce inside each host, allreduce across hosts, spread inside each host (c.topology; one host,
// or none known: the ring). Must be called on the whole mesh, not inside a group.
void allreduceHierarchical(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);
// Runs `algorithm` (dispatch.cc); kAuto: the hierarchical one on a layered topology, otherwise
// the one c.cost chooses (calibrating it first, on every rank of c at once).
void allreduceBy(AllreduceAlgorithm algorithm, Context& c, const void* in, void* out, std::size_t count,
                 DataType t, ReduceOp op);

void broadcastChain(Context& c, void* buf, std::size_t bytes, int root);
// Runs `algorithm` (dispatch.cc); kAuto: the tree up to 64 KiB, the chain above.
void broadcastBy(BroadcastAlgorithm algorithm, Context& c, void* buf, std::size_t bytes, int root);
void broadcastTree(Context& c, void* buf, std::size_t bytes, int root);

// Binary-tree reduce to `root` (out is written on the root only).
void reduceTree(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op, int root);

// Ring allgather of variable blocks: rank r's block is counts[r] bytes at offsets[r] of out.
void allgathervRing(Context& c, const void* in, void* out, std::span<const std::size_t> bytes,
                    std::span<const std::size_t> offsets);
// Ring reduce-scatter: in holds size*count elements; out receives block rank.
void reduceScatterRing(Context& c, const void* in, void* out, std::size_t count, DataType t, ReduceOp op);

// Direct (linear) gather and scatter through the root; `bytes` per rank.
void gatherLinear(Context& c, const void* in, void* out, std::size_t bytes, int root);
void scatterLinear(Context& c, const void* in, void* out, std::size_t bytes, int root);

// Pairwise exchange: at step s rank r sends to r+s and receives from r-s. Byte counts/offsets.
void alltoallvPairwise(Context& c, const void* in, std::span<const std::size_t> sendBytes,
                       std::span<const std::size_t> sendOffsets, void* out,
                       std::span<const std::size_t> recvBytes, std::span<const std::size_t> recvOffsets);

// Dissemination barrier: ceil(log2 p) rounds of one-byte messages.
void barrierDissemination(Context& c);

}  // namespace gyre::collectives
