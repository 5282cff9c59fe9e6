// Top-k and PowerSGD compression (src/torch/gradient_compression.h): what each sends, that error
// feedback loses nothing for good, exactness where the compression loses nothing, and the options
// DistributedOptimizer refuses.
#include "torch/gradient_compression.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "gyre/gyre.h"
#include "gyre/torch/distributed_optimizer.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre::torch {
namespace {

using ::torch::Tensor;

using test::makeComm;

// A float32 tensor summed or averaged over the ranks, in a copy: what the compressors must give.
Tensor overRanks(Communicator& comm, const Tensor& t, ReduceOp op) {
  Tensor out = t.contiguous().clone();
  comm.allreduce(out.data_ptr<float>(), out.data_ptr<float>(), static_cast<std::size_t>(out.numel()),
                 {DataType::kFloat32, op});
  return out;
}

TEST(TopK, SendsTheLargestEntriesOfEveryRankAndOwesTheRestUntilSent) {
  auto store = createMemoryStore();
  test::runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto topk = detail::makeTopK(0.2);  // 2 of 10 entries per step
    Tensor g = ::torch::zeros({10});
    const std::vector<float> mine = rank == 0 ? std::vector<float>{0, 0.1f, 0, 5, 0, 0.2f, 0, -7, 0, 0.3f}
                                              : std::vector<float>{0, 6, 0, 0, 0.4f, 0, 0, 2, 0, 0};
    for (int i = 0; i < 10; ++i) g[i] = mine[static_cast<std::size_t>(i)];
    Tensor sum = g.clone();
    comm->allreduce(sum.data_ptr<float>(), sum.data_ptr<float>(), 10);
    Tensor sent = g.clone();
    // Step 1: rank 0 sends entries 3 and 7, rank 1 entries 1 and 7; the sum arrives everywhere.
    EXPECT_EQ(topk->reduce(*comm, {sent}, /*average=*/false, {}), 2 * 2 * sizeof(float));
    const std::vector<float> first = {0, 6, 0, 5, 0, 0, 0, -5, 0, 0};
    for (int i = 0; i < 10; ++i)
      EXPECT_FLOAT_EQ(sent[i].item<float>(), first[static_cast<std::size_t>(i)]) << i;
    // Then nothing new: what each rank owes arrives over the next steps, the largest first, until
    // the total is every rank's gradient, exactly.
    Tensor total = sent.clone();
    for (int step = 0; step < 4; ++step) {
      Tensor none = ::torch::zeros({10});
      topk->reduce(*comm, {none}, false, {});
      total += none;
    }
    EXPECT_LT(test::maxDiff(total, sum), 1e-6) << "rank " << rank;
  });
}

// The sampled threshold picks the same entries as a full topk: distinct indices whose magnitudes
// are the k largest (ties may pick other indices of the same magnitude), whether the sample's
// threshold holds (random entries), takes nearly everything (mostly zeros) or falls short and
// the whole tensor is searched (a few huge entries the sample misses).
TEST(TopK, LargestEntriesAreTheExactTopKWhicheverPathFindsThem) {
  auto gen = ::at::detail::createCPUGenerator(7);
  const std::int64_t n = 300'000;
  Tensor mostlyZero = ::torch::zeros({n});
  mostlyZero.narrow(0, 1000, 500).uniform_(1, 2, gen);
  Tensor fewHuge = ::torch::rand({n}, gen);
  fewHuge.narrow(0, 5, 2000).add_(100);  // the top 2000 in one run of indices
  // 1 at exactly the 8192 entries the sample reads (i * 2654435761 mod n), 0 elsewhere: the
  // threshold is 1 and leaves 8192 candidates, fewer than k = 9000, so the whole tensor is searched.
  Tensor sampled = ::torch::zeros({n});
  sampled.index_fill_(
      0, ::torch::arange(8192, ::torch::kLong).mul_(std::int64_t{2654435761} % n).remainder_(n), 1);
  const std::vector<std::pair<Tensor, std::int64_t>> cases = {{::torch::randn({n}, gen).abs_(), 3000},
                                                              {::torch::randn({n}, gen).abs_(), 1},
                                                              {mostlyZero, 3000},
                                                              {fewHuge, 2000},
                                                              {sampled, 9000},
                                                              {::torch::rand({5000}, gen), 50}};
  for (const auto& [magnitude, k] : cases) {
    const Tensor got = detail::largestEntries(magnitude, k);
    ASSERT_EQ(got.numel(), k);
    EXPECT_EQ(std::get<0>(::at::_unique(got)).numel(), k);
    const Tensor want = std::get<0>(std::get<0>(magnitude.topk(k)).sort());
    EXPECT_TRUE(::torch::equal(std::get<0>(magnitude.index_select(0, got).sort()), want)) << k;
  }
}

TEST(TopK, WithRatioOneIsTheExactAverageOfSeveralTensors) {
  auto store = createMemoryStore();
  test::runThreads(3, [&](int rank) {
    auto comm = makeComm(store, rank, 3);
    auto topk = detail::makeTopK(1.0);
    auto gen = ::at::detail::createCPUGenerator(static_cast<std::uint64_t>(10 + rank));
    std::vector<Tensor> grads = {::torch::randn({4, 3}, gen), ::torch::randn({5}, gen)};
    std::vector<Tensor> want;
    for (const Tensor& g : grads) want.push_back(overRanks(*comm, g, ReduceOp::kAverage));
    topk->reduce(*comm, grads, /*average=*/true, {});
    for (std::size_t i = 0; i < grads.size(); ++i) EXPECT_LT(test::maxDiff(grads[i], want[i]), 1e-6) << i;
  });
  EXPECT_THROW(detail::makeTopK(0), InvalidArgument);
  EXPECT_THROW(detail::makeTopK(1.5), InvalidArgument);
}

// Gradients whose average has rank <= r are sent exactly by one power-iteration step: P spans
// their column space. Biases travel uncompressed.
TEST(PowerSgd, IsExactForGradientsOfLowRankAndAveragesTheRest) {
  const auto basis = ::torch::randn({12, 2}, ::at::detail::createCPUGenerator(3));
  auto store = createMemoryStore();
  test::runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto power = detail::makePowerSgd(2, {{12, 2, 5}, {12}});
    auto gen = ::at::detail::createCPUGenerator(static_cast<std::uint64_t>(20 + rank));
    for (int step = 0; step < 3; ++step) {
      // A [12, 2, 5] weight, as a 12 x 10 matrix of rank 2 (the same column space on both ranks).
      std::vector<Tensor> grads = {basis.mm(::torch::randn({2, 10}, gen)).view({12, 2, 5}),
                                   ::torch::randn({12}, gen)};
      std::vector<Tensor> want;
      for (const Tensor& g : grads) want.push_back(overRanks(*comm, g, ReduceOp::kAverage));
      // P (12 x 2) and the bias, then Q (10 x 2): 58 floats, not 132.
      EXPECT_EQ(power->reduce(*comm, grads, /*average=*/true, {}), (12 * 2 + 12 + 10 * 2) * sizeof(float));
      for (std::size_t i = 0; i < grads.size(); ++i)
        EXPECT_LT(test::maxDiff(grads[i], want[i]), 1e-4) << "step " << step << " gradient " << i;
    }
  });
  EXPECT_THROW(detail::makePowerSgd(0, {{4, 4}}), InvalidArgument);
  // 8 x 8 shrinks up to rank 3 ((8 + 8) 3 < 64), 10 x 4 up to rank 2: rank 4 compresses neither.
  EXPECT_THROW(detail::makePowerSgd(4, {{8, 8}, {10, 4}, {100}}), InvalidArgument);
  EXPECT_THROW(detail::makePowerSgd(1, {{100}}), InvalidArgument);     // no matrix at all
  EXPECT_NO_THROW(detail::makePowerSgd(3, {{8, 8}, {10, 4}, {100}}));  // 8 x 8 compressed, 10 x 4 whole
}

// A full-rank gradient is approximated; what is left out is sent later (error feedback): with the
// same gradient every step, the running mean of what arrives tends to it.
TEST(PowerSgd, ErrorFeedbackDeliversAFullRankGradientOverSteps) {
  auto store = createMemoryStore();
  test::runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto power = detail::makePowerSgd(1, {{6, 6}});
    const Tensor g =
        ::torch::randn({6, 6}, ::at::detail::createCPUGenerator(static_cast<std::uint64_t>(30 + rank)));
    const Tensor want = overRanks(*comm, g, ReduceOp::kAverage);
    Tensor sum = ::torch::zeros({6, 6});
    Tensor once;
    const int steps = 200;
    for (int step = 0; step < steps; ++step) {
      Tensor sent = g.clone();
      power->reduce(*comm, {sent}, true, {});
      if (step == 0) once = sent.clone();
      sum += sent;
    }
    EXPECT_GT(test::maxDiff(once, want), 0.1) << "one rank-1 step cannot carry a full-rank 6 x 6 gradient";
    EXPECT_LT(test::maxDiff(sum / steps, want), 0.05) << "rank " << rank;
  });
}

// Summed (average = false), each rank's error is what its own share left out: over many steps of
// the same gradients the sum arrives, not W times too little. A gradient that is zero for a step
// does not stop its matrix for good (the warm start's zero column is drawn again).
TEST(PowerSgd, SumsDeliverTheSumAndAZeroStepDoesNotStopAMatrix) {
  auto store = createMemoryStore();
  test::runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto power = detail::makePowerSgd(1, {{6, 6}});
    Tensor zero = ::torch::zeros({6, 6});
    power->reduce(*comm, {zero}, false, {});
    EXPECT_EQ(zero.abs().max().item<float>(), 0);
    const Tensor g =
        ::torch::randn({6, 6}, ::at::detail::createCPUGenerator(static_cast<std::uint64_t>(40 + rank)));
    const Tensor want = overRanks(*comm, g, ReduceOp::kSum);
    Tensor sum = ::torch::zeros({6, 6});
    const int steps = 200;
    for (int step = 0; step < steps; ++step) {
      Tensor sent = g.clone();
      power->reduce(*comm, {sent}, false, {});
      sum += sent;
    }
    EXPECT_LT(test::maxDiff(sum / steps, want), 0.1) << "rank " << rank;
  });
}

TEST(GradientCompression, ParsesItsNamesAndRefusesBadValues) {
  DistributedOptimizerOptions o;
  setCompression(o, "topk:0.05");
  EXPECT_EQ(o.compression, Compression::kTopK);
  EXPECT_DOUBLE_EQ(o.topkRatio, 0.05);
  setCompression(o, "powersgd:2");
  EXPECT_EQ(o.compression, Compression::kPowerSgd);
  EXPECT_EQ(o.powerSgdRank, 2);
  EXPECT_EQ(parseCompression("topk"), Compression::kTopK);
  EXPECT_EQ(parseCompression("bf16"), Compression::kBf16);
  for (const char* bad :
       {"topk:0", "topk:1.5", "topk:x", "topk:", "powersgd:0", "powersgd:1.5", "fp16:2", "zip"})
    EXPECT_THROW(setCompression(o, bad), InvalidArgument) << bad;
}

}  // namespace
}  // namespace gyre::torch
