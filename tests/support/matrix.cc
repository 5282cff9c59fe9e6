#include "support/matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "common/reduce.h"

namespace gyre::test {
namespace {

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                              DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax};
const AllreduceAlgorithm kAllreduceAlgorithms[] = {AllreduceAlgorithm::kNaive, AllreduceAlgorithm::kRing,
                                                   AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree,
                                                   AllreduceAlgorithm::kAuto};

// The input of `rank` at element i: small integers, non-negative for uint8; for products at
// most two factors of 2 over 8 ranks, so nothing overflows an int8.
double inputValue(DataType t, ReduceOp op, int rank, std::size_t i) {
  if (op == ReduceOp::kProduct) return ((i + static_cast<std::size_t>(rank)) % 7 == 0) ? 2.0 : 1.0;
  const long v = static_cast<long>((i * 7 + static_cast<std::size_t>(rank) * 13) % 7);
  return t == DataType::kUInt8 ? static_cast<double>(v % 4) : static_cast<double>(v - 3);
}

void store(DataType t, void* base, std::size_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DataType::kFloat16: static_cast<std::uint16_t*>(base)[i] = reduce::floatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16:
      static_cast<std::uint16_t*>(base)[i] = reduce::floatToBfloat16(static_cast<float>(v));
      break;
    case DataType::kInt8: static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(v); break;
    case DataType::kUInt8: static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(v); break;
    case DataType::kInt32: static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v); break;
    case DataType::kInt64: static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(v); break;
    case DataType::kInt16: static_cast<std::int16_t*>(base)[i] = static_cast<std::int16_t>(v); break;
  }
}

std::vector<std::uint8_t> makeInput(DataType t, ReduceOp op, int rank, std::size_t count) {
  std::vector<std::uint8_t> buf(count * dtypeSize(t) + 1);
  for (std::size_t i = 0; i < count; ++i) store(t, buf.data(), i, inputValue(t, op, rank, i));
  return buf;
}

// Elements [begin, begin + count) of the reduction of every rank's input, computed exactly and
// finished the way the kernels do.
std::vector<std::uint8_t> expected(DataType t, ReduceOp op, int size, std::size_t count, std::size_t begin = 0) {
  std::vector<std::uint8_t> out(count * dtypeSize(t) + 1);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = begin + k;
    double acc = inputValue(t, op, 0, i);
    for (int r = 1; r < size; ++r) {
      const double v = inputValue(t, op, r, i);
      acc = reduce::referenceCombine(op, acc, v);
    }
    store(t, out.data(), k, acc);
  }
  if (op == ReduceOp::kAverage) reduce::divide(t, out.data(), count, static_cast<std::size_t>(size));
  return out;
}

// Index of the first differing element, or -1.
long firstDifference(const void* a, const void* b, std::size_t count, DataType t) {
  const std::size_t e = dtypeSize(t);
  for (std::size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const char*>(a) + i * e, static_cast<const char*>(b) + i * e, e) != 0)
      return static_cast<long>(i);
  return -1;
}

std::string label(const char* what, DataType t, ReduceOp op, std::size_t count, bool inPlace, int rank) {
  return std::string(what) + " " + std::string(toString(t)) + " " + std::string(toString(op)) +
         " count=" + std::to_string(count) + (inPlace ? " in-place" : " out-of-place") + " rank " +
         std::to_string(rank);
}

// One allreduce per algorithm and layout, all checked against one reference.
void allreduceEveryAlgorithm(Communicator& comm, DataType t, ReduceOp op, std::size_t count) {
  const auto input = makeInput(t, op, comm.rank(), count);
  const auto want = expected(t, op, comm.size(), count);
  for (AllreduceAlgorithm algo : kAllreduceAlgorithms) {
    for (bool inPlace : {true, false}) {
      auto in = input;
      std::vector<std::uint8_t> out(in.size(), 0xAB);
      void* dst = inPlace ? in.data() : out.data();
      comm.allreduce(in.data(), dst, count, AllreduceOptions{t, op, algo});
      EXPECT_EQ(firstDifference(dst, want.data(), count, t), -1)
          << label(toString(algo).data(), t, op, count, inPlace, comm.rank());
      if (!inPlace) {
        EXPECT_EQ(out.back(), 0xAB) << "wrote past the end: " << label("allreduce", t, op, count, false, comm.rank());
        EXPECT_EQ(std::memcmp(in.data(), input.data(), count * dtypeSize(t)), 0) << "changed its input";
      }
    }
  }
}

}  // namespace

MatrixOptions defaultMatrix() {
  MatrixOptions m;
  const char* quick = std::getenv("GYRE_TEST_QUICK");
  if (quick != nullptr && std::string(quick) == "1") m.largeCounts = {(1u << 16) + 3};
  return m;
}

void checkAllreduce(Communicator& comm, const MatrixOptions& m) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps)
      for (std::size_t count : m.smallCounts) allreduceEveryAlgorithm(comm, t, op, count);
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax})
      for (std::size_t count : m.largeCounts) allreduceEveryAlgorithm(comm, t, op, count);
}

void checkRootedAndGatherCollectives(Communicator& comm, const MatrixOptions& m) {
  const int p = comm.size();
  const int me = comm.rank();
  std::vector<std::size_t> counts = m.smallCounts;
  counts.insert(counts.end(), m.largeCounts.begin(), m.largeCounts.end());
  for (std::size_t count : counts) {
    for (int root : {0, p - 1}) {
      for (BroadcastAlgorithm algo : {BroadcastAlgorithm::kChain, BroadcastAlgorithm::kTree, BroadcastAlgorithm::kAuto}) {
        auto buf = me == root ? makeInput(DataType::kInt32, ReduceOp::kSum, root, count)
                              : std::vector<std::uint8_t>(count * 4 + 1, 0);
        comm.broadcast(buf.data(), count, BroadcastOptions{DataType::kInt32, root, algo});
        auto want = makeInput(DataType::kInt32, ReduceOp::kSum, root, count);
        EXPECT_EQ(firstDifference(buf.data(), want.data(), count, DataType::kInt32), -1)
            << "broadcast " << toString(algo) << " root " << root << " count " << count << " rank " << me;
      }
      for (ReduceOp op : kAllOps) {
        for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
          auto in = makeInput(t, op, me, count);
          std::vector<std::uint8_t> out(in.size(), 0);
          comm.reduce(in.data(), me == root ? out.data() : nullptr, count, ReduceOptions{t, op, root});
          if (me != root) continue;
          auto want = expected(t, op, p, count);
          EXPECT_EQ(firstDifference(out.data(), want.data(), count, t), -1)
              << label("reduce", t, op, count, false, me) << " root " << root;
        }
      }
      // gather / scatter with blocks tagged by their rank.
      auto block = makeInput(DataType::kFloat64, ReduceOp::kSum, me, count);
      std::vector<std::uint8_t> all(count * 8 * p + 1, 0);
      comm.gather(block.data(), all.data(), count, CollectiveOptions{DataType::kFloat64, ReduceOp::kSum, root});
      for (int r = 0; me == root && r < p; ++r) {
          EXPECT_EQ(firstDifference(all.data() + r * count * 8,
                                    makeInput(DataType::kFloat64, ReduceOp::kSum, r, count).data(), count,
                                    DataType::kFloat64),
                    -1)
              << "gather block " << r << " count " << count;
      }
      std::vector<std::uint8_t> part(count * 8 + 1, 0);
      comm.scatter(all.data(), part.data(), count, CollectiveOptions{DataType::kFloat64, ReduceOp::kSum, root});
      EXPECT_EQ(firstDifference(part.data(), block.data(), count, DataType::kFloat64), -1)
          << "scatter count " << count << " rank " << me;
    }
    // allgather, in place and out of place.
    for (bool inPlace : {false, true}) {
      auto mine = makeInput(DataType::kInt8, ReduceOp::kSum, me, count);
      std::vector<std::uint8_t> all(count * p + 1, 0);
      if (inPlace && count > 0) std::memcpy(all.data() + me * count, mine.data(), count);
      comm.allgather(inPlace ? all.data() + me * count : mine.data(), all.data(), count,
                     CollectiveOptions{DataType::kInt8});
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(firstDifference(all.data() + r * count, makeInput(DataType::kInt8, ReduceOp::kSum, r, count).data(),
                                  count, DataType::kInt8),
                  -1)
            << "allgather block " << r << " count " << count << (inPlace ? " in place" : "");
    }
    // allgatherv with uneven (and some empty) blocks.
    {
      std::vector<std::size_t> sizes(p);
      for (int r = 0; r < p; ++r) sizes[r] = (r % 3 == 1) ? 0 : count + static_cast<std::size_t>(r);
      std::size_t offset = 0, total = 0;
      for (int r = 0; r < p; ++r) total += sizes[r];
      auto mine = makeInput(DataType::kUInt8, ReduceOp::kSum, me, sizes[me]);
      std::vector<std::uint8_t> all(total + 1, 0);
      comm.allgatherv(mine.data(), all.data(), sizes, CollectiveOptions{DataType::kUInt8});
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(firstDifference(all.data() + offset, makeInput(DataType::kUInt8, ReduceOp::kSum, r, sizes[r]).data(),
                                  sizes[r], DataType::kUInt8),
                  -1)
            << "allgatherv block " << r;
        offset += sizes[r];
      }
    }
    // reduce-scatter: every op on float32 and int32.
    for (ReduceOp op : kAllOps) {
      for (DataType t : {DataType::kFloat32, DataType::kInt32}) {
        auto in = makeInput(t, op, me, count * p);
        std::vector<std::uint8_t> out(count * dtypeSize(t) + 1, 0);
        comm.reduceScatter(in.data(), out.data(), count, CollectiveOptions{t, op});
        auto want = expected(t, op, p, count, static_cast<std::size_t>(me) * count);
        EXPECT_EQ(firstDifference(out.data(), want.data(), count, t), -1)
            << label("reduce_scatter", t, op, count, false, me);
      }
    }
    // alltoall: block r of rank s holds s*1000 + r + i.
    {
      std::vector<std::int32_t> in(count * p), out(count * p, -1);
      for (int r = 0; r < p; ++r)
        for (std::size_t i = 0; i < count; ++i) in[r * count + i] = me * 1000 + r + static_cast<int>(i % 100);
      comm.alltoall(in.data(), out.data(), count, CollectiveOptions{DataType::kInt32});
      for (int s = 0; s < p; ++s)
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(out[s * count + i], s * 1000 + me + static_cast<int>(i % 100)) << "alltoall from " << s;
    }
  }
  // alltoallv: rank s sends (s + r) % 3 * 5 elements to rank r.
  {
    std::vector<std::size_t> sendCounts(p), recvCounts(p);
    for (int r = 0; r < p; ++r) sendCounts[r] = static_cast<std::size_t>((me + r) % 3 * 5), recvCounts[r] = sendCounts[r];
    std::vector<std::int64_t> in, out(std::accumulate(recvCounts.begin(), recvCounts.end(), std::size_t{0}), -1);
    for (int r = 0; r < p; ++r)
      for (std::size_t i = 0; i < sendCounts[r]; ++i) in.push_back(me * 100 + r * 10 + static_cast<long>(i));
    comm.alltoallv(in.data(), sendCounts, out.data(), recvCounts, CollectiveOptions{DataType::kInt64});
    std::size_t at = 0;
    for (int s = 0; s < p; ++s)
      for (std::size_t i = 0; i < recvCounts[s]; ++i, ++at)
        EXPECT_EQ(out[at], s * 100 + me * 10 + static_cast<long>(i)) << "alltoallv from " << s;
  }
  comm.barrier();
}

void checkPointToPoint(Communicator& comm) {
  const int p = comm.size();
  const int me = comm.rank();
  if (p == 1) return;
  const int right = (me + 1) % p, left = (me + p - 1) % p;
  std::vector<double> out(5000, me), in(5000, -1);
  auto s = comm.sendAsync(out.data(), out.size(), right, P2POptions{DataType::kFloat64, 42});
  comm.recv(in.data(), in.size(), left, P2POptions{DataType::kFloat64, 42});
  s->wait();
  EXPECT_EQ(in, std::vector<double>(5000, left));
}

}  // namespace gyre::test
