// The public Communicator: argument checks, once, then the call goes to Impl as an OpDesc.
#include "gyre/communicator.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "api/communicator_impl.h"
#include "common/check.h"

namespace gyre {

using collectives::OpDesc;
using collectives::OpType;

namespace {

void checkDtype(DataType t) {
  GYRE_ARG_CHECK(static_cast<unsigned>(t) <= static_cast<unsigned>(DataType::kInt16), "invalid dtype ",
                 static_cast<int>(t));
}

void checkOp(ReduceOp op) {
  GYRE_ARG_CHECK(static_cast<unsigned>(op) <= static_cast<unsigned>(ReduceOp::kMax), "invalid reduce op ",
                 static_cast<int>(op));
}

void checkTimeout(Timeout t) { GYRE_ARG_CHECK(t.count() >= 0, "time-out must not be negative: ", t.count(), " ms"); }

// count elements of dtype, times `blocks`, must fit in memory; a non-empty buffer needs a pointer.
void checkBuffer(const char* what, const void* p, std::size_t count, DataType t, std::size_t blocks = 1) {
  const std::size_t limit = std::numeric_limits<std::size_t>::max() / dtypeSize(t) / std::max<std::size_t>(blocks, 1);
  GYRE_ARG_CHECK(count <= limit, what, ": count ", count, " of ", toString(t), " overflows");
  GYRE_ARG_CHECK(count == 0 || p != nullptr, what, " is null but count is ", count);
}

std::size_t total(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

std::shared_ptr<Communicator> Communicator::create(std::shared_ptr<Store> store, int rank, int size,
                                                   CommunicatorOptions options) {
  return std::shared_ptr<Communicator>(
      new Communicator(std::make_unique<Impl>(std::move(store), rank, size, std::move(options))));
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
std::vector<int> Communicator::hostIndices() const { return impl_->hostIndices(); }
const CommunicatorOptions& Communicator::options() const { return impl_->options(); }

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  const std::int64_t mine[2] = {color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size()));
  allgather(mine, all.data(), 2, CollectiveOptions{DataType::kInt64});
  const std::uint64_t index = impl_->nextSplit();
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < size(); ++r)
    if (all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  CommunicatorOptions o = options();
  o.name = o.name + "/split" + std::to_string(index) + "/color" + std::to_string(color);
  return create(impl_->store(), newRank, static_cast<int>(members.size()), o);
}

// Each public call builds its OpDesc here, once, for the blocking and the async form alike.
namespace {

OpDesc allreduceDesc(const void* in, void* out, std::size_t count, const AllreduceOptions& o) {
  checkDtype(o.dtype), checkOp(o.op), checkTimeout(o.timeout);
  checkBuffer("allreduce input", in, count, o.dtype);
  checkBuffer("allreduce output", out, count, o.dtype);
  GYRE_ARG_CHECK(
      static_cast<unsigned>(o.algorithm) <= static_cast<unsigned>(AllreduceAlgorithm::kHierarchical),
      "invalid allreduce algorithm ", static_cast<int>(o.algorithm));
  OpDesc d;
  d.type = OpType::kAllreduce, d.dtype = o.dtype, d.op = o.op, d.algorithm = static_cast<int>(o.algorithm);
  d.input = in, d.output = out, d.count = count, d.timeout = o.timeout;
  return d;
}

void checkRoot(int root, int size) {
  GYRE_ARG_CHECK(root >= 0 && root < size, "root ", root, " is not a rank of a communicator of size ", size);
}

OpDesc broadcastDesc(void* buf, std::size_t count, const BroadcastOptions& o, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout), checkRoot(o.root, size);
  checkBuffer("broadcast buffer", buf, count, o.dtype);
  GYRE_ARG_CHECK(static_cast<unsigned>(o.algorithm) <= static_cast<unsigned>(BroadcastAlgorithm::kTree),
                 "invalid broadcast algorithm ", static_cast<int>(o.algorithm));
  OpDesc d;
  d.type = OpType::kBroadcast, d.dtype = o.dtype, d.root = o.root, d.algorithm = static_cast<int>(o.algorithm);
  d.input = buf, d.output = buf, d.count = count, d.timeout = o.timeout;
  return d;
}

OpDesc reduceDesc(const void* in, void* out, std::size_t count, const ReduceOptions& o, int rank, int size) {
  checkDtype(o.dtype), checkOp(o.op), checkTimeout(o.timeout), checkRoot(o.root, size);
  checkBuffer("reduce input", in, count, o.dtype);
  if (rank == o.root) checkBuffer("reduce output (root)", out, count, o.dtype);
  OpDesc d;
  d.type = OpType::kReduce, d.dtype = o.dtype, d.op = o.op, d.root = o.root;
  d.input = in, d.output = out, d.count = count, d.timeout = o.timeout;
  return d;
}

// Gather-like ops: `in` holds inBlocks blocks and `out` outBlocks blocks of `count` elements.
OpDesc blockDesc(OpType type, const void* in, std::size_t inBlocks, void* out, std::size_t outBlocks,
                 std::size_t count, const CollectiveOptions& o) {
  checkDtype(o.dtype), checkOp(o.op), checkTimeout(o.timeout);
  const char* name = collectives::toString(type);
  if (inBlocks > 0) checkBuffer(name, in, count, o.dtype, inBlocks);
  if (outBlocks > 0) checkBuffer(name, out, count, o.dtype, outBlocks);
  OpDesc d;
  d.type = type, d.dtype = o.dtype, d.op = o.op, d.root = o.root;
  d.input = in, d.output = out, d.count = count, d.timeout = o.timeout;
  return d;
}

OpDesc allgathervDesc(const void* in, void* out, std::span<const std::size_t> counts, const CollectiveOptions& o,
                      int rank, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout);
  GYRE_ARG_CHECK(static_cast<int>(counts.size()) == size, "allgatherv needs ", size, " counts, got ",
                 counts.size());
  checkBuffer("allgatherv input", in, counts[rank], o.dtype);
  checkBuffer("allgatherv output", out, total(counts), o.dtype);
  OpDesc d;
  d.type = OpType::kAllgatherv, d.dtype = o.dtype, d.input = in, d.output = out, d.count = counts[rank];
  d.counts.assign(counts.begin(), counts.end());
  d.timeout = o.timeout;
  return d;
}

OpDesc alltoallvDesc(const void* in, std::span<const std::size_t> sendCounts, void* out,
                     std::span<const std::size_t> recvCounts, const CollectiveOptions& o, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout);
  GYRE_ARG_CHECK(static_cast<int>(sendCounts.size()) == size && static_cast<int>(recvCounts.size()) == size,
                 "alltoallv needs ", size, " send and receive counts, got ", sendCounts.size(), " and ",
                 recvCounts.size());
  checkBuffer("alltoallv input", in, total(sendCounts), o.dtype);
  checkBuffer("alltoallv output", out, total(recvCounts), o.dtype);
  OpDesc d;
  d.type = OpType::kAlltoallv, d.dtype = o.dtype, d.input = in, d.output = out, d.count = total(sendCounts);
  d.counts.assign(sendCounts.begin(), sendCounts.end());
  d.recvCounts.assign(recvCounts.begin(), recvCounts.end());
  d.timeout = o.timeout;
  return d;
}

OpDesc p2pDesc(OpType type, const void* buf, std::size_t count, int peer, const P2POptions& o, int rank, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout);
  GYRE_ARG_CHECK(peer >= 0 && peer < size && peer != rank, collectives::toString(type), " peer ", peer,
                 " is not another rank of a communicator of size ", size, " (this is rank ", rank, ")");
  checkBuffer(collectives::toString(type), buf, count, o.dtype);
  OpDesc d;
  d.type = type, d.dtype = o.dtype, d.root = peer, d.tag = o.tag, d.count = count, d.timeout = o.timeout;
  d.input = buf, d.output = const_cast<void*>(buf);
  return d;
}

OpDesc sendRecvDesc(const void* in, std::size_t sendCount, int dst, void* out, std::size_t recvCount, int src,
                    const P2POptions& o, int rank, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout);
  GYRE_ARG_CHECK(dst >= -1 && dst < size && dst != rank, "sendrecv destination ", dst,
                 " is not another rank of a communicator of size ", size, " (this is rank ", rank, "), nor -1");
  GYRE_ARG_CHECK(src >= -1 && src < size && src != rank, "sendrecv source ", src,
                 " is not another rank of a communicator of size ", size, " (this is rank ", rank, "), nor -1");
  if (dst >= 0) checkBuffer("sendrecv input", in, sendCount, o.dtype);
  if (src >= 0) checkBuffer("sendrecv output", out, recvCount, o.dtype);
  OpDesc d;
  d.type = OpType::kSendRecv, d.dtype = o.dtype, d.tag = o.tag, d.timeout = o.timeout;
  d.root = dst, d.input = in, d.count = dst >= 0 ? sendCount : 0;
  d.source = src, d.output = out, d.recvCount = src >= 0 ? recvCount : 0;
  return d;
}

OpDesc exchangeDesc(std::span<const P2PMessage> sends, std::span<const P2PMessage> recvs, const P2POptions& o,
                    int rank, int size) {
  checkDtype(o.dtype), checkTimeout(o.timeout);
  for (const auto& [list, what] : {std::pair{sends, "exchange send"}, std::pair{recvs, "exchange receive"}})
    for (const P2PMessage& m : list) {
      GYRE_ARG_CHECK(m.peer >= 0 && m.peer < size && m.peer != rank, what, " with rank ", m.peer,
                     ", which is not another rank of a communicator of size ", size, " (this is rank ", rank, ")");
      checkBuffer(what, m.buffer, m.count, o.dtype);
    }
  OpDesc d;
  d.type = OpType::kExchange, d.dtype = o.dtype, d.tag = o.tag, d.timeout = o.timeout;
  d.sends.assign(sends.begin(), sends.end());
  d.recvs.assign(recvs.begin(), recvs.end());
  return d;
}

OpDesc barrierDesc(const BarrierOptions& o) {
  checkTimeout(o.timeout);
  OpDesc d;
  d.type = OpType::kBarrier, d.timeout = o.timeout;
  return d;
}

}  // namespace

#define GYRE_BOTH_FORMS(Name, Params, Desc)                                     \
  void Communicator::Name Params { impl_->runBlocking(Desc); }                 \
  std::shared_ptr<Work> Communicator::Name##Async Params { return impl_->submit(Desc); }

GYRE_BOTH_FORMS(allreduce, (const void* in, void* out, std::size_t count, const AllreduceOptions& o),
                allreduceDesc(in, out, count, o))
GYRE_BOTH_FORMS(broadcast, (void* buf, std::size_t count, const BroadcastOptions& o),
                broadcastDesc(buf, count, o, size()))
GYRE_BOTH_FORMS(reduce, (const void* in, void* out, std::size_t count, const ReduceOptions& o),
                reduceDesc(in, out, count, o, rank(), size()))
GYRE_BOTH_FORMS(allgather, (const void* in, void* out, std::size_t count, const CollectiveOptions& o),
                blockDesc(OpType::kAllgather, in, 1, out, size(), count, o))
GYRE_BOTH_FORMS(allgatherv,
                (const void* in, void* out, std::span<const std::size_t> counts, const CollectiveOptions& o),
                allgathervDesc(in, out, counts, o, rank(), size()))
GYRE_BOTH_FORMS(reduceScatter, (const void* in, void* out, std::size_t count, const CollectiveOptions& o),
                blockDesc(OpType::kReduceScatter, in, size(), out, 1, count, o))
GYRE_BOTH_FORMS(gather, (const void* in, void* out, std::size_t count, const CollectiveOptions& o),
                (checkRoot(o.root, size()),
                 blockDesc(OpType::kGather, in, 1, out, rank() == o.root ? size() : 0, count, o)))
GYRE_BOTH_FORMS(scatter, (const void* in, void* out, std::size_t count, const CollectiveOptions& o),
                (checkRoot(o.root, size()),
                 blockDesc(OpType::kScatter, in, rank() == o.root ? size() : 0, out, 1, count, o)))
GYRE_BOTH_FORMS(alltoall, (const void* in, void* out, std::size_t count, const CollectiveOptions& o),
                blockDesc(OpType::kAlltoall, in, size(), out, size(), count, o))
GYRE_BOTH_FORMS(alltoallv,
                (const void* in, std::span<const std::size_t> sendCounts, void* out,
                 std::span<const std::size_t> recvCounts, const CollectiveOptions& o),
                alltoallvDesc(in, sendCounts, out, recvCounts, o, size()))
GYRE_BOTH_FORMS(barrier, (const BarrierOptions& o), barrierDesc(o))
GYRE_BOTH_FORMS(send, (const void* buf, std::size_t count, int dst, const P2POptions& o),
                p2pDesc(OpType::kSend, buf, count, dst, o, rank(), size()))
GYRE_BOTH_FORMS(recv, (void* buf, std::size_t count, int src, const P2POptions& o),
                p2pDesc(OpType::kRecv, buf, count, src, o, rank(), size()))
GYRE_BOTH_FORMS(sendRecv,
                (const void* in, std::size_t sendCount, int dst, void* out, std::size_t recvCount, int src,
                 const P2POptions& o),
                sendRecvDesc(in, sendCount, dst, out, recvCount, src, o, rank(), size()))

GYRE_BOTH_FORMS(exchange, (std::span<const P2PMessage> sends, std::span<const P2PMessage> recvs, const P2POptions& o),
                exchangeDesc(sends, recvs, o, rank(), size()))

#undef GYRE_BOTH_FORMS

}  // namespace gyre
