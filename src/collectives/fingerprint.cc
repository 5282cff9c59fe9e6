#include "collectives/fingerprint.h"

#include <cstring>
#include <sstream>
#include <vector>

#include "common/check.h"

namespace gyre::collectives {
namespace {

struct Signature {
  std::uint64_t sequence;
  std::uint64_t count;
  std::uint64_t countsHash;
  std::uint32_t type;
  std::uint32_t dtype;
  std::uint32_t op;
  std::int32_t root;
  std::uint32_t algorithm;
  std::uint32_t pad;

  bool operator==(const Signature& o) const { return std::memcmp(this, &o, sizeof(Signature)) == 0; }
};

std::uint64_t hashCounts(const std::vector<std::size_t>& counts) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t c : counts) h = (h ^ c) * 1099511628211ull;
  return h;
}

Signature signatureOf(std::uint64_t sequence, const OpDesc& d) {
  using collectives::OpType;
  const bool reduces =
      d.type == OpType::kAllreduce || d.type == OpType::kReduce || d.type == OpType::kReduceScatter;
  const bool rooted = d.type == OpType::kBroadcast || d.type == OpType::kReduce ||
                      d.type == OpType::kGather || d.type == OpType::kScatter;
  Signature s{};
  s.sequence = sequence;
  s.type = static_cast<std::uint32_t>(d.type);
  s.dtype = static_cast<std::uint32_t>(d.dtype);
  // An allgatherv's and an alltoallv's own count (this rank's part, its total sent) differ between
  // ranks by design: allgatherv's list of counts must agree (its hash), alltoallv's need not.
  const bool vector = d.type == OpType::kAllgatherv || d.type == OpType::kAlltoallv;
  s.count = vector ? 0 : d.count;
  s.countsHash = d.type == OpType::kAllgatherv ? hashCounts(d.counts) : 0;
  s.op = reduces ? static_cast<std::uint32_t>(d.op) : 0;
  s.root = rooted ? d.root : 0;
  s.algorithm = (d.type == OpType::kAllreduce || d.type == OpType::kBroadcast) ? d.algorithm : 0;
  return s;
}

std::string describe(const Signature& s) {
  OpDesc d;
  d.type = static_cast<collectives::OpType>(s.type);
  d.dtype = static_cast<DataType>(s.dtype);
  d.count = s.count;
  d.op = static_cast<ReduceOp>(s.op);
  d.root = s.root;
  d.algorithm = static_cast<int>(s.algorithm);
  std::ostringstream out;
  out << "call #" << s.sequence << " " << d.describe();
  if (s.countsHash != 0) out << " [counts hash " << std::hex << s.countsHash << "]";
  return out.str();
}

}  // namespace

void checkFingerprint(transport::Mesh& mesh, Deadline deadline, std::uint64_t sequence, const OpDesc& desc) {
  const int p = mesh.size();
  const int me = mesh.rank();
  if (p == 1) return;
  const Signature mine = signatureOf(sequence, desc);
  std::vector<Signature> theirs(p);
  std::vector<transport::Op> ops;
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    ops.push_back(transport::Op::send(r, &mine, sizeof(Signature)));
    ops.push_back(transport::Op::recv(r, &theirs[r], sizeof(Signature)));
  }
  mesh.run(ops, deadline);
  theirs[me] = mine;
  // Every rank sees every signature, so all report the same first mismatch against rank 0.
  for (int r = 1; r < p; ++r) {
    if (theirs[r] == theirs[0]) continue;
    GYRE_THROW(InvalidArgument, "collective mismatch (GYRE_DEBUG_COLLECTIVES): rank 0 called ",
               describe(theirs[0]), " but rank ", r, " called ", describe(theirs[r]));
  }
}

}  // namespace gyre::collectives
