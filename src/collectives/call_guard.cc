#include "collectives/call_guard.h"

#include <sstream>

namespace gyre::collectives {

CallGuard guardOf(const OpDesc& d) {
  const bool reduces = d.type == OpType::kAllreduce || d.type == OpType::kReduce || d.type == OpType::kReduceScatter;
  const bool rooted = d.type == OpType::kBroadcast || d.type == OpType::kReduce || d.type == OpType::kGather ||
                      d.type == OpType::kScatter;
  CallGuard g;
  g.type = static_cast<std::uint8_t>(d.type);
  g.dtype = static_cast<std::uint8_t>(d.dtype);
  g.op = reduces ? static_cast<std::uint8_t>(d.op) : 0;
  g.root = rooted ? d.root : 0;
  if (d.type == OpType::kAllgatherv) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the counts every rank must agree on
    for (std::size_t c : d.counts) h = (h ^ c) * 1099511628211ull;
    g.count = h;
  } else if (d.type != OpType::kAlltoallv) {
    g.count = d.count;
  }
  return g;
}

std::string describe(const CallGuard& g) {
  if (g.magic != CallGuard{}.magic || g.type > static_cast<std::uint8_t>(OpType::kRecv))
    return "data that is not a collective call's first message (a different call, or none)";
  const auto type = static_cast<OpType>(g.type);
  std::ostringstream out;
  out << toString(type) << "(";
  if (type == OpType::kAllgatherv) {
    out << "counts hash " << std::hex << g.count << std::dec;
  } else {
    out << "count=" << g.count;
  }
  out << ", " << toString(static_cast<DataType>(g.dtype));
  if (type == OpType::kAllreduce || type == OpType::kReduce || type == OpType::kReduceScatter)
    out << ", " << toString(static_cast<ReduceOp>(g.op));
  if (type == OpType::kBroadcast || type == OpType::kReduce || type == OpType::kGather || type == OpType::kScatter)
    out << ", root " << g.root;
  out << ")";
  return out.str();
}

}  // namespace gyre::collectives
