// The reduction algorithms (every allreduce, reduce, reduce-scatter) on the fake mesh, against a
// serial reference: every dtype × op at counts {0, 1, 7, 1023}, float32 and bfloat16 at
// 2^20+3 (sum and max), world sizes 1-8, in place and out of place. Results are exact (see exact_values.h),
// bit-identical across ranks and run to run; out-of-place inputs stay untouched and every
// output byte is written (outputs start as 0x80 bytes, which no reference value encodes to).
#include "collectives/algorithms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/topology.h"
#include "support/exact_values.h"
#include "support/fake_mesh.h"

namespace gyre::collectives {
namespace {

using test::FakeJob;
using test::FakeNetwork;
using Buffers = std::vector<std::vector<std::byte>>;
using AllreduceFn = void (*)(Context&, const void*, void*, std::size_t, DataType, ReduceOp);

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                               DataType::kInt32,    DataType::kInt64, DataType::kInt16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kProduct, ReduceOp::kMin,
                             ReduceOp::kMax};
constexpr std::size_t kSmallCounts[] = {0, 1, 7, 1023};
constexpr std::byte kUnwritten{0x80};

// Sanitizer builds set GYRE_TEST_QUICK=1: a smaller large count.
std::size_t largeCount() {
  const char* quick = std::getenv("GYRE_TEST_QUICK");
  return quick != nullptr && std::string(quick) == "1" ? 65537 : (std::size_t{1} << 20) + 3;
}

struct Case {
  DataType dtype;
  ReduceOp op;
};
constexpr Case kLargeCases[] = {{DataType::kFloat32, ReduceOp::kSum}, {DataType::kBFloat16, ReduceOp::kMax}};

// allreduceHalvingDoubling runs one of its two variants by the cost model; each is tested
// directly here, the choice between them in cost_model_test.cc.
struct Variant {
  const char* name;
  AllreduceFn fn;
};
const Variant kVariants[] = {{"Naive", allreduceNaive},
                             {"Ring", allreduceRing},
                             {"RecursiveDoubling", allreduceRecursiveDoubling},
                             {"Rabenseifner", allreduceRabenseifner},
                             {"Tree", allreduceTree}};

std::string describe(const char* what, int p, DataType t, ReduceOp op, std::size_t count, bool inPlace) {
  std::ostringstream out;
  out << what << " p=" << p << " " << toString(t) << " " << toString(op) << " count=" << count
      << (inPlace ? " in place" : " out of place");
  return out.str();
}

// Inputs and encoded references are computed once per shape and kept: the large counts would
// otherwise spend more time building them than running the algorithms.
using CacheKey = std::tuple<DataType, ReduceOp, int, std::size_t>;
std::mutex cacheMutex;
std::map<CacheKey, std::vector<std::byte>> inputCache, referenceCache;

const std::vector<std::byte>& exactBuffer(DataType t, ReduceOp op, int rank, std::size_t count) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto [it, added] = inputCache.try_emplace({t, op == ReduceOp::kProduct ? op : ReduceOp::kSum, rank, count});
  if (added) {
    it->second.resize(count * dtypeSize(t));
    test::fillExact(t, op, rank, it->second.data(), count);
  }
  return it->second;
}

// The reference of elements [0, count) over p ranks, encoded; empty where it is not exactly
// representable (float16/bfloat16 average), which firstMismatch then checks with a tolerance.
const std::vector<std::byte>& encodedReference(DataType t, ReduceOp op, int p, std::size_t count) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto [it, added] = referenceCache.try_emplace({t, op, p, count});
  const bool rounded = op == ReduceOp::kAverage && (t == DataType::kFloat16 || t == DataType::kBFloat16);
  if (added && !rounded) {
    const std::size_t es = dtypeSize(t);
    it->second.resize(count * es);
    for (std::size_t i = 0; i < count; ++i)
      test::encode(t, test::exactReference(t, op, p, i), &it->second[i * es]);
  }
  return it->second;
}

// Checks one rank's result: elements [first, first + count) of a reduction of `total` elements.
bool expectReference(const std::string& what, int rank, DataType t, ReduceOp op, int p,
                     const std::byte* result, std::size_t count, std::size_t first, std::size_t total) {
  const std::vector<std::byte>& reference = encodedReference(t, op, p, total);
  const std::size_t es = dtypeSize(t);
  if (!reference.empty() && (count == 0 || std::memcmp(result, &reference[first * es], count * es) == 0))
    return true;
  std::string diff;
  if (test::firstMismatch(t, op, p, result, count, first, diff) == count) {
    if (reference.empty()) return true;
    diff = "differs from the encoded reference";
  }
  ADD_FAILURE() << what << ": rank " << rank << " " << diff;
  return false;
}

bool expectEmptyNetwork(FakeJob& job, const std::string& what) {
  if (job.network().pendingBytes() == 0) return true;
  ADD_FAILURE() << what << ": " << job.network().pendingBytes() << " bytes left unread";
  return false;
}

// One allreduce on every rank. Returns false (after reporting) on any failure.
bool checkAllreduce(FakeJob& job, const Variant& v, DataType t, ReduceOp op, std::size_t count,
                    bool inPlace) {
  const int p = job.size();
  const std::string what = describe(v.name, p, t, op, count, inPlace);
  const std::size_t n = count * dtypeSize(t);
  Buffers in(static_cast<std::size_t>(p)), out(static_cast<std::size_t>(p));
  job.run([&](Context& c, int r) {
    auto& i = in[static_cast<std::size_t>(r)];
    auto& o = out[static_cast<std::size_t>(r)];
    i = exactBuffer(t, op, r, count);
    if (inPlace) return v.fn(c, i.data(), i.data(), count, t, op);
    o.assign(n, kUnwritten);
    v.fn(c, i.data(), o.data(), count, t, op);
  });
  if (::testing::Test::HasFailure()) return false;
  const Buffers& result = inPlace ? in : out;
  if (!expectReference(what, 0, t, op, p, result[0].data(), count, 0, count)) return false;
  for (int r = 1; r < p; ++r) {
    if (result[static_cast<std::size_t>(r)] != result[0]) {
      ADD_FAILURE() << what << ": rank " << r << " differs from rank 0";
      return false;
    }
    if (!inPlace && in[static_cast<std::size_t>(r)] != exactBuffer(t, op, r, count)) {
      ADD_FAILURE() << what << ": rank " << r << "'s input was modified";
      return false;
    }
  }
  return expectEmptyNetwork(job, what);
}

class AllreduceAlgorithmTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(AllreduceAlgorithmTest, MatchesSerialReference) {
  const Variant& v = kVariants[std::get<0>(GetParam())];
  FakeJob job(std::get<1>(GetParam()));
  for (bool inPlace : {false, true}) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kSmallCounts)
          if (!checkAllreduce(job, v, t, op, count, inPlace)) return;
    for (const Case& large : kLargeCases)
      if (!checkAllreduce(job, v, large.dtype, large.op, largeCount(), inPlace)) return;
  }
}

std::string variantName(const ::testing::TestParamInfo<std::tuple<int, int>>& param) {
  return std::string(kVariants[std::get<0>(param.param)].name) + "_p" +
         std::to_string(std::get<1>(param.param));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AllreduceAlgorithmTest,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kVariants))),
                                            ::testing::Range(1, 9)),
                         variantName);

// Random float32 inputs, whose sums depend on the order of reduction: every rank must still
// agree bit for bit, and so must two runs; the result is close to the double-precision sum.
TEST(AllreduceDeterminism, RandomFloatsGiveTheSameBitsEverywhereAndEveryTime) {
  constexpr std::size_t kCount = 65537;
  for (int p : {3, 5, 8}) {
    FakeJob job(p);
    std::vector<std::vector<float>> in(static_cast<std::size_t>(p));
    std::vector<double> reference(kCount, 0);
    for (int r = 0; r < p; ++r) {
      std::mt19937 gen(static_cast<unsigned>(r + 1));
      std::uniform_real_distribution<float> dist(-1, 1);
      auto& v = in[static_cast<std::size_t>(r)];
      v.resize(kCount);
      for (std::size_t i = 0; i < kCount; ++i) reference[i] += (v[i] = dist(gen));
    }
    for (const Variant& v : kVariants) {
      std::vector<std::vector<float>> first, out(static_cast<std::size_t>(p), std::vector<float>(kCount));
      for (int run = 0; run < 2; ++run) {
        job.run([&](Context& c, int r) {
          const auto i = static_cast<std::size_t>(r);
          v.fn(c, in[i].data(), out[i].data(), kCount, DataType::kFloat32, ReduceOp::kSum);
        });
        ASSERT_FALSE(HasFailure()) << v.name << " p=" << p;
        for (int r = 1; r < p; ++r)
          ASSERT_EQ(std::memcmp(out[static_cast<std::size_t>(r)].data(), out[0].data(), kCount * 4), 0)
              << v.name << " p=" << p << ": rank " << r << " differs from rank 0";
        if (run == 0) first = out;
      }
      ASSERT_EQ(std::memcmp(first[0].data(), out[0].data(), kCount * 4), 0)
          << v.name << " p=" << p << ": runs differ";
      for (std::size_t i = 0; i < kCount; ++i)
        ASSERT_NEAR(out[0][i], reference[i], 1e-5) << v.name << " p=" << p << " element " << i;
    }
  }
}

// Reduce-scatter: rank r's output is the reduction of block r of every rank's input.
bool checkReduceScatter(FakeJob& job, DataType t, ReduceOp op, std::size_t count, bool inPlace) {
  const int p = job.size();
  const std::string what = describe("reduceScatterRing", p, t, op, count, inPlace);
  const std::size_t n = count * dtypeSize(t);
  Buffers in(static_cast<std::size_t>(p)), out(static_cast<std::size_t>(p));
  job.run([&](Context& c, int r) {
    auto& i = in[static_cast<std::size_t>(r)];
    auto& o = out[static_cast<std::size_t>(r)];
    i = exactBuffer(t, op, r, count * static_cast<std::size_t>(p));
    if (inPlace)
      return reduceScatterRing(c, i.data(), i.data() + static_cast<std::size_t>(r) * n, count, t, op);
    o.assign(n, kUnwritten);
    reduceScatterRing(c, i.data(), o.data(), count, t, op);
  });
  if (::testing::Test::HasFailure()) return false;
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const std::byte* result = inPlace ? in[i].data() + i * n : out[i].data();
    if (!expectReference(what, r, t, op, p, result, count, i * count, count * static_cast<std::size_t>(p)))
      return false;
  }
  return expectEmptyNetwork(job, what);
}

class ReduceScatterRingTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceScatterRingTest, MatchesSerialReference) {
  FakeJob job(GetParam());
  const std::size_t large = largeCount() / static_cast<std::size_t>(GetParam()) + 1;  // about 2^20 in all
  for (bool inPlace : {false, true}) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kSmallCounts)
          if (!checkReduceScatter(job, t, op, count, inPlace)) return;
    for (const Case& c : kLargeCases)
      if (!checkReduceScatter(job, c.dtype, c.op, large, inPlace)) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReduceScatterRingTest, ::testing::Range(1, 9));

// Reduce to a root: only the root's output is written (the others pass null).
bool checkReduce(FakeJob& job, DataType t, ReduceOp op, std::size_t count, bool inPlace, int root) {
  const int p = job.size();
  const std::string what = describe("reduceTree", p, t, op, count, inPlace) + " root=" + std::to_string(root);
  Buffers in(static_cast<std::size_t>(p));
  std::vector<std::byte> out;
  job.run([&](Context& c, int r) {
    auto& i = in[static_cast<std::size_t>(r)];
    i = exactBuffer(t, op, r, count);
    void* o = nullptr;
    if (r == root && inPlace) o = i.data();
    if (r == root && !inPlace) {
      out.assign(i.size(), kUnwritten);
      o = out.data();
    }
    reduceTree(c, i.data(), o, count, t, op, root);
  });
  if (::testing::Test::HasFailure()) return false;
  const auto& result = inPlace ? in[static_cast<std::size_t>(root)] : out;
  if (!expectReference(what, root, t, op, p, result.data(), count, 0, count)) return false;
  for (int r = 0; r < p; ++r) {
    if (r == root && inPlace) continue;
    if (in[static_cast<std::size_t>(r)] != exactBuffer(t, op, r, count)) {
      ADD_FAILURE() << what << ": rank " << r << "'s input was modified";
      return false;
    }
  }
  return expectEmptyNetwork(job, what);
}

class ReduceTreeTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceTreeTest, MatchesSerialReferenceAtEveryRoot) {
  const int p = GetParam();
  FakeJob job(p);
  for (int root : {0, p - 1, p / 2}) {
    for (bool inPlace : {false, true}) {
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (std::size_t count : kSmallCounts)
            if (!checkReduce(job, t, op, count, inPlace, root)) return;
      for (const Case& c : kLargeCases)
        if (root == p - 1 && !checkReduce(job, c.dtype, c.op, largeCount(), inPlace, root)) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReduceTreeTest, ::testing::Range(1, 9));

// FIFOs of 24 bytes: every transfer is cut into many pieces that straddle element boundaries,
// which shakes out ordering and dependency mistakes a roomy FIFO hides.
TEST(TinyFifo, ReductionsStayCorrect) {
  const Case cases[] = {{DataType::kFloat64, ReduceOp::kSum},
                        {DataType::kFloat16, ReduceOp::kAverage},
                        {DataType::kInt8, ReduceOp::kMax}};
  for (int p : {3, 8}) {
    FakeJob job(p, 24);
    for (const Case& c : cases)
      for (std::size_t count : {std::size_t{7}, std::size_t{301}}) {
        for (const Variant& v : kVariants)
          if (!checkAllreduce(job, v, c.dtype, c.op, count, false)) return;
        if (!checkReduceScatter(job, c.dtype, c.op, count, true)) return;
        if (!checkReduce(job, c.dtype, c.op, count, false, p - 1)) return;
      }
  }
}

// The hierarchical allreduce on host layouts (the host index of each rank): hosts of equal size,
// with their ranks together or interleaved, hosts of different sizes, one host, and one rank per
// host (the last two run the ring).
const std::vector<int> kLayouts[] = {{0, 0, 1, 1},       {0, 1, 0, 1, 2, 2}, {0, 0, 0, 1, 1, 1},
                                     {0, 1, 2, 0, 1, 2}, {0, 0, 1},          {0, 1, 1, 1},
                                     {0, 0, 0, 1, 2, 2}, {0, 0, 0},          {0, 1, 2}};
const Variant kHierarchical{"Hierarchical", allreduceHierarchical};

std::string layoutName(const ::testing::TestParamInfo<int>& param) {
  std::string name = "hosts";
  for (int h : kLayouts[param.param]) name += std::to_string(h);
  return name;
}

class HierarchicalAllreduceTest : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalAllreduceTest, MatchesSerialReference) {
  const std::vector<int>& hosts = kLayouts[GetParam()];
  FakeJob job(static_cast<int>(hosts.size()), test::kFakeFifoCapacity, hosts);
  for (bool inPlace : {false, true}) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kSmallCounts)
          if (!checkAllreduce(job, kHierarchical, t, op, count, inPlace)) return;
    for (const Case& large : kLargeCases)
      if (!checkAllreduce(job, kHierarchical, large.dtype, large.op, largeCount(), inPlace)) return;
    // From 2 MiB the phases overlap in one op list (fusedBlockwise), also in quick runs.
    for (DataType t : kTypes)
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax})
        if (!checkAllreduce(job, kHierarchical, t, op, (std::size_t{2} << 20) / dtypeSize(t) + 7, inPlace))
          return;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, HierarchicalAllreduceTest,
                         ::testing::Range(0, static_cast<int>(std::size(kLayouts))), layoutName);

// Bytes host 0 sends to host 1 in one allreduce of `bytes` on 2 hosts × 2 ranks (ranks 0, 1 on
// host 0), chosen by `algorithm`. The model across hosts is set, so no calibration adds traffic.
std::size_t bytesAcross(AllreduceAlgorithm algorithm, std::size_t bytes) {
  FakeJob job(4, test::kFakeFifoCapacity, {0, 0, 1, 1});
  for (int r = 0; r < 4; ++r) job.topology(r).acrossCost = parseCostModel("5,1,8");
  std::vector<std::vector<float>> data(4, std::vector<float>(bytes / sizeof(float), 1.0f));
  job.run([&](Context& c, int r) {
    float* d = data[static_cast<std::size_t>(r)].data();
    allreduceBy(algorithm, c, d, d, bytes / sizeof(float), DataType::kFloat32, ReduceOp::kSum);
  });
  for (const auto& d : data) EXPECT_EQ(d.front(), 4.0f);
  FakeNetwork& net = job.network();
  return net.sentBytes(0, 2) + net.sentBytes(0, 3) + net.sentBytes(1, 2) + net.sentBytes(1, 3);
}

// Reducing inside each host first: each host sends n bytes to the other (2(H-1)/H·n), the flat
// ring 1.5n (2(p-1)/p·n over its one link between the hosts); auto picks the hierarchical one.
TEST(HierarchicalAllreduce, SendsTheBoundAcrossHostsAndIsWhatAutoPicks) {
  constexpr std::size_t kBytes = 1 << 20;
  EXPECT_EQ(bytesAcross(AllreduceAlgorithm::kRing, kBytes), kBytes * 3 / 2);
  EXPECT_EQ(bytesAcross(AllreduceAlgorithm::kHierarchical, kBytes), kBytes);
  EXPECT_EQ(bytesAcross(AllreduceAlgorithm::kAuto, kBytes), kBytes);
}

TEST(Topology, GroupsRanksByHost) {
  const Topology t = Topology::of(std::vector<int>{0, 1, 0, 1, 2, 2}, 3);
  EXPECT_EQ(t.hosts, (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 5}}));
  EXPECT_EQ(t.host, 1);
  EXPECT_EQ(t.local, 1);
  EXPECT_EQ(t.across, (std::vector<int>{2, 3, 5}));
  EXPECT_TRUE(t.uniform());
  EXPECT_TRUE(t.layered());
  const Topology uneven = Topology::of(std::vector<int>{0, 0, 1}, 1);
  EXPECT_FALSE(uneven.uniform());
  EXPECT_EQ(uneven.across, (std::vector<int>{0, 2}));
  EXPECT_FALSE(Topology::of(std::vector<int>{0, 0, 0}, 0).layered());
  EXPECT_FALSE(Topology::of(std::vector<int>{0, 1, 2}, 0).layered());
  EXPECT_THROW(Topology::of(std::vector<int>{1, 0}, 0), InvalidArgument);  // not in order of lowest rank
}

TEST(Scratch, GrowsAndStaysAligned) {
  Scratch s;
  void* a = s.get(0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  void* b = s.get(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 64, 0u);
  std::memset(b, 1, 1000);
  EXPECT_EQ(s.get(10), b);  // smaller requests reuse the buffer
  void* c = s.get(1 << 20);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c) % 64, 0u);
  std::memset(c, 2, 1 << 20);
}

}  // namespace
}  // namespace gyre::collectives
