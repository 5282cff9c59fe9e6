#include "collectives/dispatch.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <span>
#include <sstream>

#include "collectives/algorithms.h"
#include "collectives/cost_model.h"
#include "collectives/tally.h"
#include "collectives/topology.h"
#include "common/check.h"
#include "common/logging.h"

namespace gyre::collectives {
namespace {

constexpr std::uint32_t kP2PMagic = 0x50325047;  // "GP2P"
constexpr std::size_t kTreeBroadcastMaxBytes = 64 * 1024;

struct P2PHeader {
  std::uint32_t magic;
  std::int32_t tag;
  std::uint64_t bytes;
};

void copyIfApart(void* out, const void* in, std::size_t bytes) {
  if (out != in && bytes > 0) std::memmove(out, in, bytes);
}

AllreduceAlgorithm chooseAllreduce(Context& c, AllreduceAlgorithm algorithm, std::size_t bytes) {
  if (algorithm != AllreduceAlgorithm::kAuto) return algorithm;
  if (c.members.empty() && c.topology != nullptr && c.topology->layered()) {
    log::debug("allreduce auto: hierarchical for ", bytes, " bytes on ", c.topology->hosts.size(), " hosts");
    return AllreduceAlgorithm::kHierarchical;
  }
  if (!c.cost.calibrated) calibrate(c);
  const AllreduceAlgorithm chosen = c.cost.choose(bytes, c.size());
  log::debug("allreduce auto: ", toString(chosen), " for ", bytes, " bytes on ", c.size(), " ranks");
  return chosen;
}

BroadcastAlgorithm chooseBroadcast(BroadcastAlgorithm algorithm, std::size_t bytes) {
  if (algorithm != BroadcastAlgorithm::kAuto) return algorithm;
  return bytes <= kTreeBroadcastMaxBytes ? BroadcastAlgorithm::kTree : BroadcastAlgorithm::kChain;
}

// The algorithm a call of `d` runs, auto resolved (allreduce, broadcast), and its name for the
// tallies; the other operations have one algorithm each.
std::pair<int, std::string_view> resolveAlgorithm(Context& c, const OpDesc& d, std::size_t bytes) {
  switch (d.type) {
    case OpType::kAllreduce: {
      if (c.size() == 1 || bytes == 0) return {d.algorithm, "none"};
      const AllreduceAlgorithm a = chooseAllreduce(c, static_cast<AllreduceAlgorithm>(d.algorithm), bytes);
      return {static_cast<int>(a), toString(a)};
    }
    case OpType::kBroadcast: {
      const BroadcastAlgorithm a = chooseBroadcast(static_cast<BroadcastAlgorithm>(d.algorithm), bytes);
      return {static_cast<int>(a), toString(a)};
    }
    case OpType::kReduce:
      return {d.algorithm, "tree"};
    case OpType::kAllgather:
    case OpType::kAllgatherv:
    case OpType::kReduceScatter:
      return {d.algorithm, "ring"};
    case OpType::kGather:
    case OpType::kScatter:
      return {d.algorithm, "linear"};
    case OpType::kAlltoall:
    case OpType::kAlltoallv:
      return {d.algorithm, "pairwise"};
    case OpType::kBarrier:
      return {d.algorithm, "dissemination"};
    case OpType::kSend:
    case OpType::kRecv:
    case OpType::kSendRecv:
    case OpType::kExchange:
      return {d.algorithm, "point-to-point"};
  }
  return {d.algorithm, "?"};
}

// The bytes this rank puts into a call: its block of an allgatherv, every block it sends in an
// alltoall(v), its buffer otherwise.
std::size_t bytesOf(const Context& c, const OpDesc& d) {
  if (d.type == OpType::kBarrier) return 0;
  std::size_t count = d.count;
  if (d.type == OpType::kAllgatherv && static_cast<std::size_t>(c.rank()) < d.counts.size()) {
    count = d.counts[static_cast<std::size_t>(c.rank())];
  } else if (d.type == OpType::kAlltoallv) {
    count = std::accumulate(d.counts.begin(), d.counts.end(), std::size_t{0});
  } else if (d.type == OpType::kAlltoall) {
    count = d.count * static_cast<std::size_t>(c.size());
  } else if (d.type == OpType::kExchange) {
    count = 0;
    for (const P2PMessage& m : d.sends) count += m.count;
  }
  return count * dtypeSize(d.dtype);
}

// Per-rank byte sizes and offsets of back-to-back blocks.
void layout(const std::vector<std::size_t>& counts, std::size_t esize, std::vector<std::size_t>& bytes,
            std::vector<std::size_t>& offsets) {
  bytes.resize(counts.size());
  offsets.resize(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    bytes[r] = counts[r] * esize;
    offsets[r] = at;
    at += bytes[r];
  }
}

void allgatherv(Context& c, const OpDesc& d, const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> bytes, offsets;
  layout(counts, dtypeSize(d.dtype), bytes, offsets);
  if (c.size() == 1) {
    copyIfApart(d.output, d.input, bytes[0]);
    return;
  }
  allgathervRing(c, d.input, d.output, bytes, offsets);
}

void alltoallv(Context& c, const OpDesc& d, const std::vector<std::size_t>& sendCounts,
               const std::vector<std::size_t>& recvCounts) {
  const std::size_t esize = dtypeSize(d.dtype);
  std::vector<std::size_t> sendBytes, sendOffsets, recvBytes, recvOffsets;
  layout(sendCounts, esize, sendBytes, sendOffsets);
  layout(recvCounts, esize, recvBytes, recvOffsets);
  alltoallvPairwise(c, d.input, sendBytes, sendOffsets, d.output, recvBytes, recvOffsets);
}

// A receive whose tag or size does not match still consumes the message, so the pair stays in
// step and the communicator remains usable after the InvalidArgument.
void recvMessage(Context& c, const OpDesc& d) {
  P2PHeader header{};
  c.mesh.recv(d.root, &header, sizeof(header), c.deadline);
  if (header.magic != kP2PMagic)
    GYRE_THROW(ProtocolError, "rank ", d.root, " sent something other than a point-to-point message");
  const std::size_t expected = d.count * dtypeSize(d.dtype);
  if (header.tag == d.tag && header.bytes == expected) {
    c.mesh.recv(d.root, d.output, expected, c.deadline);
    return;
  }
  c.mesh.recv(d.root, c.scratch.get(header.bytes), header.bytes, c.deadline);
  GYRE_THROW(InvalidArgument, "recv from rank ", d.root, " expected tag ", d.tag, " and ", expected,
             " bytes, but the message has tag ", header.tag, " and ", header.bytes, " bytes (discarded)");
}

// Every send and receive in one run of the mesh, progressed together: a header and the data per
// message, each received header checked as soon as it is in, before the data behind it is taken
// (it must be the one a matching send writes). Messages with one peer go in list order each way.
// `name` is the call's, for a mismatch.
void exchangeMessages(Context& c, const char* name, DataType dtype, int tag, std::span<const P2PMessage> sends,
                      std::span<const P2PMessage> recvs) {
  const std::size_t esize = dtypeSize(dtype);
  std::vector<P2PHeader> out, expected, in(recvs.size());
  for (const P2PMessage& m : sends) out.push_back({kP2PMagic, tag, m.count * esize});
  for (const P2PMessage& m : recvs) expected.push_back({kP2PMagic, tag, m.count * esize});
  std::vector<transport::Op> ops;
  for (std::size_t i = 0; i < sends.size(); ++i) {
    ops.push_back(transport::Op::send(sends[i].peer, &out[i], sizeof(P2PHeader)));
    ops.back().more = true;
    ops.push_back(transport::Op::send(sends[i].peer, sends[i].buffer, out[i].bytes));
  }
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    ops.push_back(transport::Op::recv(recvs[i].peer, &in[i], sizeof(P2PHeader)));
    ops.back().expect = &expected[i];
    ops.push_back(transport::Op::recv(recvs[i].peer, recvs[i].buffer, expected[i].bytes));
  }
  try {
    c.mesh.run(ops, c.deadline);
  } catch (const transport::CallMismatch&) {
    std::ostringstream what;
    for (std::size_t i = 0; i < recvs.size(); ++i)
      if (ops[2 * (sends.size() + i)].done == sizeof(P2PHeader) &&
          (in[i].magic != kP2PMagic || in[i].tag != tag || in[i].bytes != expected[i].bytes))
        what << name << " from rank " << recvs[i].peer << " expected a message with tag " << tag << " and "
             << expected[i].bytes << " bytes; the one that came has tag " << in[i].tag << " and " << in[i].bytes
             << " bytes (magic " << (in[i].magic == kP2PMagic ? "of a point-to-point message" : "not of a message")
             << "); ";
    GYRE_THROW(InvalidArgument, what.str(), "the communicator cannot go on");
  }
}

// sendRecv (and a plain send: source -1) as an exchange of at most one message each way.
void sendRecvMessages(Context& c, const OpDesc& d) {
  std::vector<P2PMessage> sends, recvs;
  if (d.root >= 0) sends.push_back({d.root, const_cast<void*>(d.input), d.count});
  if (d.source >= 0) recvs.push_back({d.source, d.output, d.recvCount});
  exchangeMessages(c, "sendrecv", d.dtype, d.tag, sends, recvs);
}

}  // namespace

void allreduceBy(AllreduceAlgorithm algorithm, Context& c, const void* in, void* out, std::size_t count,
                 DataType t, ReduceOp op) {
  if (c.size() == 1 || count == 0) {
    copyIfApart(out, in, count * dtypeSize(t));
    return;
  }
  switch (chooseAllreduce(c, algorithm, count * dtypeSize(t))) {
    case AllreduceAlgorithm::kNaive:
      return allreduceNaive(c, in, out, count, t, op);
    case AllreduceAlgorithm::kRing:
      return allreduceRing(c, in, out, count, t, op);
    case AllreduceAlgorithm::kHalvingDoubling:
      return allreduceHalvingDoubling(c, in, out, count, t, op);
    case AllreduceAlgorithm::kTree:
      return allreduceTree(c, in, out, count, t, op);
    case AllreduceAlgorithm::kHierarchical:
      return allreduceHierarchical(c, in, out, count, t, op);
    case AllreduceAlgorithm::kAuto:
      break;
  }
  GYRE_THROW(Error, "cost model chose no allreduce algorithm");
}

void broadcastBy(BroadcastAlgorithm algorithm, Context& c, void* buf, std::size_t bytes, int root) {
  if (c.size() == 1 || bytes == 0) return;
  algorithm = chooseBroadcast(algorithm, bytes);
  if (algorithm == BroadcastAlgorithm::kTree) return broadcastTree(c, buf, bytes, root);
  broadcastChain(c, buf, bytes, root);
}

const char* toString(OpType type) {
  switch (type) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kAllgatherv: return "allgatherv";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kGather: return "gather";
    case OpType::kScatter: return "scatter";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kAlltoallv: return "alltoallv";
    case OpType::kBarrier: return "barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kSendRecv: return "sendrecv";
    case OpType::kExchange: return "exchange";
  }
  return "?";
}

std::string OpDesc::describe() const {
  std::ostringstream out;
  out << toString(type) << "(";
  if (type == OpType::kBarrier) return out.str() + ")";
  out << "count=" << count << ", " << gyre::toString(dtype);
  if (type == OpType::kAllreduce || type == OpType::kReduce || type == OpType::kReduceScatter)
    out << ", " << gyre::toString(op);
  if (type == OpType::kAllreduce) out << ", algo=" << gyre::toString(static_cast<AllreduceAlgorithm>(algorithm));
  if (type == OpType::kBroadcast) out << ", algo=" << gyre::toString(static_cast<BroadcastAlgorithm>(algorithm));
  if (type == OpType::kBroadcast || type == OpType::kReduce || type == OpType::kGather || type == OpType::kScatter)
    out << ", root=" << root;
  if (type == OpType::kSend || type == OpType::kRecv) out << ", peer=" << root << ", tag=" << tag;
  if (type == OpType::kSendRecv)
    out << ", to=" << root << ", from=" << source << ", recv count=" << recvCount << ", tag=" << tag;
  if (type == OpType::kExchange) {
    out << ", sends to";
    for (const P2PMessage& m : sends) out << " " << m.peer << ":" << m.count;
    out << ", receives from";
    for (const P2PMessage& m : recvs) out << " " << m.peer << ":" << m.count;
    out << ", tag=" << tag;
  }
  if (!counts.empty()) out << ", counts=" << std::accumulate(counts.begin(), counts.end(), std::size_t{0}) << " total";
  out << ")";
  return out.str();
}

namespace {

// `algorithm`: d's, with auto resolved.
void run(Context& c, const OpDesc& d, int algorithm) {
  const std::size_t esize = dtypeSize(d.dtype);
  const int p = c.size();
  switch (d.type) {
    case OpType::kAllreduce:
      return allreduceBy(static_cast<AllreduceAlgorithm>(algorithm), c, d.input, d.output, d.count, d.dtype,
                         d.op);
    case OpType::kBroadcast:
      return broadcastBy(static_cast<BroadcastAlgorithm>(algorithm), c, d.output, d.count * esize, d.root);
    case OpType::kReduce:
      if (p == 1) return copyIfApart(d.output, d.input, d.count * esize);
      if (d.count == 0) return;
      return reduceTree(c, d.input, d.output, d.count, d.dtype, d.op, d.root);
    case OpType::kAllgather: return allgatherv(c, d, std::vector<std::size_t>(p, d.count));
    case OpType::kAllgatherv: return allgatherv(c, d, d.counts);
    case OpType::kReduceScatter:
      if (p == 1) return copyIfApart(d.output, d.input, d.count * esize);
      if (d.count == 0) return;
      return reduceScatterRing(c, d.input, d.output, d.count, d.dtype, d.op);
    case OpType::kGather:
      if (p == 1) return copyIfApart(d.output, d.input, d.count * esize);
      return gatherLinear(c, d.input, d.output, d.count * esize, d.root);
    case OpType::kScatter:
      if (p == 1) return copyIfApart(d.output, d.input, d.count * esize);
      return scatterLinear(c, d.input, d.output, d.count * esize, d.root);
    case OpType::kAlltoall:
      return alltoallv(c, d, std::vector<std::size_t>(p, d.count), std::vector<std::size_t>(p, d.count));
    case OpType::kAlltoallv: return alltoallv(c, d, d.counts, d.recvCounts);
    case OpType::kBarrier:
      if (p == 1) return;
      return barrierDissemination(c);
    case OpType::kSend: return sendRecvMessages(c, d);  // its source is -1
    case OpType::kRecv: return recvMessage(c, d);
    case OpType::kSendRecv: return sendRecvMessages(c, d);
    case OpType::kExchange: return exchangeMessages(c, "exchange", d.dtype, d.tag, d.sends, d.recvs);
  }
}

}  // namespace

void execute(Context& c, const OpDesc& d) {
  const std::size_t bytes = bytesOf(c, d);
  const auto [algorithm, name] = resolveAlgorithm(c, d, bytes);
  const auto start = std::chrono::steady_clock::now();
  run(c, d, algorithm);
  addTally(toString(d.type), name, bytes,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace gyre::collectives
