// The cost model: its predictions order the algorithms the way the α-β-γ formulas say, `auto`
// picks a latency-optimal algorithm for small messages and a bandwidth-optimal one for large,
// measured timings anchor the predictions, and calibrate() measures real terms that every rank
// agrees on. Also checks that each
// allreduce moves the bytes its cost formula charges for.
#include "collectives/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "gyre/errors.h"
#include "support/fake_mesh.h"

namespace gyre::collectives {
namespace {

using test::FakeJob;

CostModel sharedMemoryHost() {
  CostModel m;
  m.calibrated = true;
  m.alpha = 5e-6;
  m.beta = 1 / 5e9;
  m.gamma = 1 / 8e9;
  return m;
}

TEST(CostModel, PredictionsGrowWithBytesAndVanishForOneRank) {
  const CostModel m = sharedMemoryHost();
  for (auto a : {AllreduceAlgorithm::kNaive, AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling,
                 AllreduceAlgorithm::kTree, AllreduceAlgorithm::kAuto}) {
    EXPECT_EQ(m.predict(a, 1 << 20, 1), 0) << toString(a);
    EXPECT_EQ(m.predict(a, 0, 8), 0) << toString(a);
    for (int p : {2, 3, 5, 8}) {
      EXPECT_GT(m.predict(a, 8, p), 0) << toString(a);
      EXPECT_LT(m.predict(a, 4096, p), m.predict(a, 1 << 20, p)) << toString(a) << " p=" << p;
    }
  }
  // The formulas of docs/algorithms.md, spot-checked.
  const double n = 1 << 20;
  EXPECT_DOUBLE_EQ(m.predict(AllreduceAlgorithm::kRing, 1 << 20, 4),
                   6 * m.alpha + 1.5 * n * m.beta + 0.75 * n * m.gamma);
  EXPECT_DOUBLE_EQ(m.predict(AllreduceAlgorithm::kNaive, 1 << 20, 4),
                   6 * m.alpha + 6 * n * m.beta + 3 * n * m.gamma);
  EXPECT_DOUBLE_EQ(m.predict(AllreduceAlgorithm::kHalvingDoubling, 1 << 20, 4),
                   4 * m.alpha + 1.5 * n * m.beta + 0.75 * n * m.gamma);
}

TEST(CostModel, SmallMessagesGoToLatencyOptimalAndLargeToBandwidthOptimal) {
  const CostModel m = sharedMemoryHost();
  for (int p = 2; p <= 8; ++p) {
    // 8 bytes: about 2·log2 p message latencies (recursive doubling, or the tree), never the
    // ring's or the naive algorithm's 2(p-1).
    const AllreduceAlgorithm small = m.choose(8, p);
    EXPECT_TRUE(small == AllreduceAlgorithm::kHalvingDoubling || small == AllreduceAlgorithm::kTree)
        << "p=" << p << ": " << toString(small);
    EXPECT_LE(m.predict(small, 8, p), 2 * std::bit_width(static_cast<unsigned>(p - 1)) * m.alpha * 1.01) << p;
    if (p == 2 || p == 4 || p == 8) {
      EXPECT_EQ(small, AllreduceAlgorithm::kHalvingDoubling) << "p=" << p;
    }
    EXPECT_TRUE(useRecursiveDoubling(m, 8, 2, p));
    // 64 MiB: an algorithm that moves 2(p-1)/p·n per rank, within 1% of that bound.
    const std::size_t large = std::size_t{64} << 20;
    const AllreduceAlgorithm a = m.choose(large, p);
    EXPECT_TRUE(a == AllreduceAlgorithm::kRing || a == AllreduceAlgorithm::kHalvingDoubling) << toString(a);
    const double bound = 2.0 * (p - 1) / p * static_cast<double>(large) * m.beta;
    EXPECT_LT(m.predict(a, large, p),
              1.01 * (bound + (p - 1.0) / p * static_cast<double>(large) * m.gamma) + 2 * (p - 1) * m.alpha)
        << "p=" << p;
    EXPECT_FALSE(useRecursiveDoubling(m, large, large / 4, p));
  }
  // Without a power of two, halving-doubling pays for folding: the ring wins large messages.
  for (int p : {3, 5, 6, 7}) EXPECT_EQ(m.choose(std::size_t{64} << 20, p), AllreduceAlgorithm::kRing) << p;
  // Fewer elements than ranks: recursive doubling whatever the bytes.
  EXPECT_TRUE(useRecursiveDoubling(m, std::size_t{1} << 30, 7, 8));
}

// A model as calibrate() leaves it on 4 ranks sharing 2 cores: the tree measured fastest at
// 4 KiB and 64 KiB, everything else slower, α-β-γ terms for the growth beyond 64 KiB.
CostModel measuredOnFourRanks() {
  CostModel m;
  m.calibrated = true;
  m.alpha = 10e-6, m.beta = 1 / 1.25e9, m.gamma = 1 / 20e9;
  m.measuredSize = 4;
  //          naive   ring    rd      rh      tree
  m.atSmall = {40e-6, 44e-6, 42e-6, 45e-6, 33e-6};
  m.atMid = {450e-6, 200e-6, 300e-6, 210e-6, 50e-6};
  return m;
}

TEST(CostModel, MeasuredTimingsAnchorThePrediction) {
  const CostModel m = measuredOnFourRanks();
  const auto tree = AllreduceVariant::kTree;
  EXPECT_DOUBLE_EQ(m.predict(tree, 8, 4), 33e-6);
  EXPECT_DOUBLE_EQ(m.predict(tree, CostModel::kSmallBytes, 4), 33e-6);
  EXPECT_DOUBLE_EQ(m.predict(tree, CostModel::kMidBytes, 4), 50e-6);
  EXPECT_DOUBLE_EQ(m.predict(tree, (CostModel::kSmallBytes + CostModel::kMidBytes) / 2, 4),
                   (33e-6 + 50e-6) / 2);
  // Beyond 64 KiB: the measured time plus the formula's growth.
  CostModel formulas = m;
  formulas.measuredSize = 0;
  const std::size_t big = std::size_t{16} << 20;
  EXPECT_DOUBLE_EQ(m.predict(AllreduceVariant::kRing, big, 4),
                   200e-6 + formulas.predict(AllreduceVariant::kRing, big, 4) -
                       formulas.predict(AllreduceVariant::kRing, CostModel::kMidBytes, 4));
  // Timings taken on another world size do not apply.
  EXPECT_DOUBLE_EQ(m.predict(AllreduceVariant::kRing, big, 8),
                   formulas.predict(AllreduceVariant::kRing, big, 8));
}

TEST(CostModel, MeasuredTimingsDecideSmallAndMidAndBandwidthDecidesLarge) {
  const CostModel m = measuredOnFourRanks();
  EXPECT_EQ(m.choose(8, 4), AllreduceAlgorithm::kTree);
  EXPECT_EQ(m.choose(64 * 1024, 4), AllreduceAlgorithm::kTree);
  // The tree moves 3n per inner rank, the ring 1.5n: far enough beyond 64 KiB the ring wins.
  EXPECT_EQ(m.choose(std::size_t{64} << 20, 4), AllreduceAlgorithm::kRing);
  // Halving-doubling follows the faster measured variant.
  EXPECT_TRUE(useRecursiveDoubling(m, 4096, 1024, 4));
  EXPECT_FALSE(useRecursiveDoubling(m, 64 * 1024, 16384, 4));
  EXPECT_DOUBLE_EQ(m.predict(AllreduceAlgorithm::kHalvingDoubling, 64 * 1024, 4), 210e-6);
}

TEST(CostModel, UncalibratedModelStillChooses) {
  const CostModel m;
  EXPECT_EQ(m.choose(8, 8), AllreduceAlgorithm::kHalvingDoubling);
  EXPECT_NE(m.choose(std::size_t{64} << 20, 6), AllreduceAlgorithm::kNaive);
  EXPECT_EQ(m.choose(std::size_t{64} << 20, 1), AllreduceAlgorithm::kRing);
}

TEST(CostModel, ParsesTheEnvironmentOverride) {
  const CostModel m = parseCostModel("5, 8,12.5");
  EXPECT_TRUE(m.calibrated);
  EXPECT_DOUBLE_EQ(m.alpha, 5e-6);
  EXPECT_DOUBLE_EQ(m.beta, 1 / 8e9);
  EXPECT_DOUBLE_EQ(m.gamma, 1 / 12.5e9);
  for (const char* bad : {"", "5,8", "5,8,12,1", "a,8,12", "5,0,12", "-1,8,12", "5,8,12x"})
    EXPECT_THROW(parseCostModel(bad), InvalidArgument) << bad;
}

TEST(CostModel, CalibrationAgreesOnEveryRank) {
  for (int p : {1, 2, 3, 5, 8}) {
    FakeJob job(p);
    std::mutex mu;
    double slowest = 0;
    job.run([&](Context& c, int) {
      const auto start = Clock::now();
      calibrate(c);
      const double took = secondsSince(start);
      std::lock_guard<std::mutex> lock(mu);
      slowest = std::max(slowest, took);
    });
    ASSERT_FALSE(HasFailure());
    const CostModel& first = job.cost(0);
    EXPECT_TRUE(first.calibrated);
    EXPECT_GT(first.gamma, 0);
    if (p > 1) {
      EXPECT_GT(first.alpha, 0) << "p=" << p;
      EXPECT_GT(first.beta, 0) << "p=" << p;
    }
    EXPECT_EQ(first.measuredSize, p > 1 ? p : 0);
    for (std::size_t v = 0; p > 1 && v < kAllreduceVariants; ++v) {
      EXPECT_GT(first.atSmall[v], 0) << v;
      EXPECT_GE(first.atMid[v], first.atSmall[v]) << v;
    }
    for (int r = 1; r < p; ++r) {
      const CostModel& other = job.cost(r);
      EXPECT_EQ(other.alpha, first.alpha) << "rank " << r;
      EXPECT_EQ(other.beta, first.beta) << "rank " << r;
      EXPECT_EQ(other.gamma, first.gamma) << "rank " << r;
      EXPECT_EQ(other.atSmall, first.atSmall) << "rank " << r;
      EXPECT_EQ(other.atMid, first.atMid) << "rank " << r;
      for (std::size_t bytes : {std::size_t{8}, std::size_t{100000}, std::size_t{1} << 26})
        EXPECT_EQ(other.choose(bytes, p), first.choose(bytes, p)) << "rank " << r;
    }
    EXPECT_EQ(job.network().pendingBytes(), 0u);
    // How long it took is reported, not asserted: speed is the benchmarks' business.
    RecordProperty("calibrate_ms_p" + std::to_string(p), static_cast<int>(slowest * 1000));
    std::printf("calibrate p=%d: %.1f ms, alpha %.2f us, beta %.3f GB/s, gamma %.3f GB/s\n", p, slowest * 1e3,
                first.alpha * 1e6, first.beta > 0 ? 1e-9 / first.beta : 0.0, 1e-9 / first.gamma);
  }
}

// Total bytes every rank sends for one allreduce of n bytes, as docs/algorithms.md states them.
TEST(WireBytes, AllreducesMoveWhatTheirCostFormulasCharge) {
  constexpr std::size_t kCount = 8400;  // divisible by every p and p' below
  constexpr std::size_t n = kCount * 4;
  struct Expect {
    const char* name;
    void (*fn)(Context&, const void*, void*, std::size_t, DataType, ReduceOp);
    CostModel model;
    std::size_t (*total)(int p, int p2);  // bytes over all ranks
  };
  CostModel latency, bandwidth;
  latency.calibrated = bandwidth.calibrated = true;
  latency.alpha = 1, latency.beta = latency.gamma = 1e-12;
  bandwidth.alpha = 0, bandwidth.beta = bandwidth.gamma = 1e-9;
  const Expect expects[] = {
      {"naive", allreduceNaive, {}, [](int p, int) { return 2 * static_cast<std::size_t>(p - 1) * n; }},
      {"ring", allreduceRing, {}, [](int p, int) { return 2 * static_cast<std::size_t>(p - 1) * n; }},
      {"tree", allreduceTree, {}, [](int p, int) { return 2 * static_cast<std::size_t>(p - 1) * n; }},
      {"rabenseifner", allreduceHalvingDoubling, bandwidth,
       [](int p, int p2) {
         return 2 * static_cast<std::size_t>(p2 - 1) * n + static_cast<std::size_t>(2 * (p - p2)) * n;
       }},
      {"recursive doubling", allreduceHalvingDoubling, latency,
       [](int p, int p2) {
         return static_cast<std::size_t>(p2 * std::countr_zero(static_cast<unsigned>(p2))) * n +
                static_cast<std::size_t>(2 * (p - p2)) * n;
       }},
  };
  for (int p : {2, 4, 5, 6, 8}) {
    const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
    for (const Expect& e : expects) {
      FakeJob job(p);
      for (int r = 0; r < p; ++r) job.cost(r) = e.model;
      std::vector<std::vector<float>> in(static_cast<std::size_t>(p), std::vector<float>(kCount, 1.0f));
      job.run([&](Context& c, int r) {
        auto& v = in[static_cast<std::size_t>(r)];
        e.fn(c, v.data(), v.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
      });
      EXPECT_EQ(job.network().sentBytes(), e.total(p, p2)) << e.name << " p=" << p;
      EXPECT_EQ(in[0][0], static_cast<float>(p)) << e.name;
    }
  }
}

}  // namespace
}  // namespace gyre::collectives
