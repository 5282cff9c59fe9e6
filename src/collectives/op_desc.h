// One collective or point-to-point call, as the engine queues it and the dispatcher runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gyre/types.h"

namespace gyre::collectives {

enum class OpType : std::uint8_t {
  kAllreduce, kBroadcast, kReduce, kAllgather, kAllgatherv, kReduceScatter, kGather, kScatter,
  kAlltoall, kAlltoallv, kBarrier, kSend, kRecv, kSendRecv, kExchange,
};

// Point-to-point: not matched across every rank as a collective is.
inline bool isPointToPoint(OpType type) {
  return type == OpType::kSend || type == OpType::kRecv || type == OpType::kSendRecv || type == OpType::kExchange;
}

const char* toString(OpType type);

struct OpDesc {
  OpType type = OpType::kBarrier;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;       // root of rooted collectives; the peer of send/recv; sendRecv's destination
  int algorithm = 0;  // AllreduceAlgorithm or BroadcastAlgorithm, by type
  int tag = 0;        // send/recv
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;               // elements (per rank for gather-like ops)
  std::vector<std::size_t> counts;     // allgatherv counts; alltoallv send counts
  std::vector<std::size_t> recvCounts; // alltoallv receive counts
  int source = -1;                     // sendRecv: the rank it receives from (-1: none)
  std::size_t recvCount = 0;           // sendRecv: the elements it receives into `output`
  std::vector<P2PMessage> sends, recvs;  // exchange
  Timeout timeout{0};

  // "allreduce(count=10, float32, sum, algo=ring)" for errors and debug mode.
  std::string describe() const;
};

}  // namespace gyre::collectives
