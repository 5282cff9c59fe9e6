// DistributedOptimizer: W ranks (threads) training on shards of a batch must reach the same
// parameters as one process training on the whole batch, whatever the buckets, compression,
// accumulation or unused parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>

#include "gyre/gyre.h"
#include "gyre/torch/broadcast.h"
#include "gyre/torch/distributed_optimizer.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre {
namespace {

using test::runThreads;
using torch::DistributedOptimizer;
using torch::DistributedOptimizerOptions;

constexpr int kBatch = 12;  // divisible by 1, 2, 3 and 4 ranks
constexpr int kSteps = 3;

using test::makeComm;

// libtorch's default generator is global: ranks (threads) build their models one at a time so
// every one starts from the same seed.
::torch::nn::Sequential makeModel() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(7);
  return ::torch::nn::Sequential(::torch::nn::Linear(20, 16), ::torch::nn::ReLU(), ::torch::nn::Linear(16, 8),
                                 ::torch::nn::ReLU(), ::torch::nn::Linear(8, 4));
}

struct Data {
  ::torch::Tensor x;
  ::torch::Tensor y;
};

Data makeData() {
  auto gen = ::at::detail::createCPUGenerator(11);
  return {::torch::randn({kSteps * kBatch, 20}, gen), ::torch::randint(0, 4, {kSteps * kBatch}, gen)};
}

std::shared_ptr<::torch::optim::SGD> makeSgd(::torch::nn::Sequential& model) {
  return std::make_shared<::torch::optim::SGD>(model->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
}

using MakeOptimizer = std::function<std::shared_ptr<::torch::optim::Optimizer>(::torch::nn::Sequential&)>;

// One process, whole batches.
std::vector<::torch::Tensor> referenceParameters(const MakeOptimizer& makeOptimizer = makeSgd) {
  auto model = makeModel();
  auto sgd = makeOptimizer(model);
  const Data data = makeData();
  for (int s = 0; s < kSteps; ++s) {
    sgd->zero_grad();
    auto x = data.x.narrow(0, s * kBatch, kBatch);
    auto y = data.y.narrow(0, s * kBatch, kBatch);
    ::torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sgd->step();
  }
  std::vector<::torch::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

void expectClose(const std::vector<::torch::Tensor>& got, const std::vector<::torch::Tensor>& want, double tol,
                 int rank) {
  test::expectClose(got, want, tol, "rank " + std::to_string(rank));
}

// Each rank trains on its contiguous share of every batch: the average of the shares' mean
// losses is the whole batch's mean loss.
std::vector<::torch::Tensor> trainDistributed(Communicator& comm, std::shared_ptr<Communicator> owned,
                                              DistributedOptimizerOptions options, int micro = 1,
                                              const MakeOptimizer& makeOptimizer = makeSgd) {
  ::torch::set_num_threads(1);
  auto model = makeModel();
  auto sgd = makeOptimizer(model);
  DistributedOptimizer opt(std::move(owned), sgd, options);
  const Data data = makeData();
  const int share = kBatch / comm.size();
  for (int s = 0; s < kSteps; ++s) {
    opt.zeroGrad();
    const int piece = share / micro;
    for (int m = 0; m < micro; ++m) {
      const int begin = s * kBatch + comm.rank() * share + m * piece;
      auto loss = ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, begin, piece)),
                                                        data.y.narrow(0, begin, piece));
      (loss / micro).backward();
    }
    opt.step();
  }
  std::vector<::torch::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

class ExactAveragingTest : public ::testing::TestWithParam<std::tuple<int, std::size_t>> {};

TEST_P(ExactAveragingTest, MatchesOneProcessOnTheWholeBatch) {
  const auto [size, capBytes] = GetParam();
  const auto want = referenceParameters();
  auto store = createMemoryStore();
  runThreads(size, [&](int rank) {
    auto comm = makeComm(store, rank, size);
    DistributedOptimizerOptions o;
    o.bucketCapBytes = capBytes;
    o.firstBucketCapBytes = std::min<std::size_t>(capBytes, 256);
    expectClose(trainDistributed(*comm, comm, o), want, 1e-5, rank);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldsAndBuckets, ExactAveragingTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(std::size_t{64}, std::size_t{25} << 20)));

TEST(DistributedOptimizerTest, AccumulatesBackwardPassesBeforeReducing) {
  const auto want = referenceParameters();
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    DistributedOptimizerOptions o;
    o.backwardPassesPerStep = 2;
    o.bucketCapBytes = 128;
    expectClose(trainDistributed(*comm, comm, o, 2), want, 1e-5, rank);
  });
}

TEST(DistributedOptimizerTest, CompressedGradientsStayClose) {
  const auto want = referenceParameters();
  for (auto compression : {torch::Compression::kFp16, torch::Compression::kBf16}) {
    auto store = createMemoryStore();
    runThreads(2, [&](int rank) {
      auto comm = makeComm(store, rank, 2);
      DistributedOptimizerOptions o;
      o.compression = compression;
      expectClose(trainDistributed(*comm, comm, o), want, compression == torch::Compression::kFp16 ? 2e-3 : 2e-2,
                  rank);
    });
  }
}

// Lossy compression through the optimizer: top-k with every entry loses nothing and matches one
// process; top-k at 10% and PowerSGD at rank 1 stay near it over the 3 steps, the same model on
// every rank.
TEST(DistributedOptimizerTest, TopKAndPowerSgdTrainThroughTheOptimizer) {
  const auto want = referenceParameters();
  for (const char* spec : {"topk:1", "topk:0.1", "powersgd:1"}) {
    auto store = createMemoryStore();
    runThreads(3, [&](int rank) {
      auto comm = makeComm(store, rank, 3);
      DistributedOptimizerOptions o;
      torch::setCompression(o, spec);
      o.bucketCapBytes = 256;
      const auto got = trainDistributed(*comm, comm, o);
      if (std::string(spec) == "topk:1") {
        expectClose(got, want, 1e-5, rank);
      } else {
        // Close to the exact run, and the same on every rank.
        test::expectClose(got, want, 0.2, std::string(spec) + " rank " + std::to_string(rank));
        std::vector<::torch::Tensor> mine = got;
        for (auto& t : mine) {
          ::torch::Tensor first = t.clone();
          comm->broadcast(first.data_ptr<float>(), static_cast<std::size_t>(first.numel()));
          EXPECT_TRUE(first.equal(t)) << spec << " rank " << rank;
        }
      }
    });
  }
}

// shareStepTimes: every rank gets every rank's ready time of the last step, in the last bucket's
// extra floats (plain, fp16) or an allreduce of their own (top-k); the gradients are unchanged.
TEST(DistributedOptimizerTest, SharesEveryRanksReadyTime) {
  const auto want = referenceParameters();
  for (const char* spec : {"none", "fp16", "topk:1"}) {
    auto store = createMemoryStore();
    runThreads(3, [&](int rank) {
      auto comm = makeComm(store, rank, 3);
      ::torch::set_num_threads(1);
      auto model = makeModel();
      DistributedOptimizerOptions o;
      torch::setCompression(o, spec);
      o.shareStepTimes = true;
      DistributedOptimizer opt(comm, makeSgd(model), o);
      EXPECT_TRUE(opt.stepTimes().empty());
      const Data data = makeData();
      for (int s = 0; s < kSteps; ++s) {
        opt.zeroGrad();
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(60));  // the slow one
        const int begin = s * kBatch + rank * (kBatch / 3);
        ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, begin, kBatch / 3)),
                                               data.y.narrow(0, begin, kBatch / 3))
            .backward();
        opt.step();
        const std::vector<double> times = opt.stepTimes();
        ASSERT_EQ(times.size(), 3u) << spec;
        EXPECT_GE(times[1], 0.055) << spec << " step " << s;
        EXPECT_LT(times[0], times[1]) << spec;
        EXPECT_LT(times[2], times[1]) << spec;
      }
      if (std::string(spec) != "fp16") {
        std::vector<::torch::Tensor> got;
        for (auto& p : model->parameters()) got.push_back(p.detach().clone());
        expectClose(got, want, 1e-5, rank);
      }
    });
  }
}

TEST(DistributedOptimizerTest, NoSyncAccumulatesLocallyUntilTheNextBackward) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    auto model = makeModel();
    auto sgd = makeSgd(model);
    DistributedOptimizer opt(comm, sgd);
    auto x = ::torch::full({1, 20}, 1.0 + rank);
    opt.zeroGrad();
    {
      auto guard = opt.noSync();
      model->forward(x).sum().backward();
    }
    const auto local = model->parameters()[0].grad().clone();  // not averaged yet
    model->forward(x).sum().backward();
    opt.synchronize();
    // Both passes are summed locally, then averaged: (2 g0 + 2 g1) / 2.
    auto both = local * 2;
    comm->allreduce(both.data_ptr(), both.data_ptr(), static_cast<std::size_t>(both.numel()),
                    {DataType::kFloat32, ReduceOp::kAverage});
    EXPECT_LE((model->parameters()[0].grad() - both).abs().max().item<double>(), 1e-5);
  });
}

// Rank 1 leaves one layer out of its graph: that layer is reduced as zeros from rank 1, so its
// gradient is half of rank 0's, and nothing hangs.
TEST(DistributedOptimizerTest, ParametersWithoutGradientAreReducedAsZeros) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    ::torch::nn::Linear shared(4, 4), extra(4, 4);  // equal or not, the gradients below do not depend on them
    std::vector<::torch::Tensor> params = shared->parameters();
    for (auto& p : extra->parameters()) params.push_back(p);
    auto sgd = std::make_shared<::torch::optim::SGD>(params, ::torch::optim::SGDOptions(0.1));
    DistributedOptimizerOptions o;
    o.bucketCapBytes = o.firstBucketCapBytes = 32;
    DistributedOptimizer opt(comm, sgd, o);
    for (int step = 0; step < 2; ++step) {
      opt.zeroGrad();
      auto x = ::torch::ones({1, 4});
      auto out = shared->forward(x);
      if (rank == 0) out = out + extra->forward(x);
      out.sum().backward();
      opt.synchronize();
      // d(sum(extra(x)))/d(extra.weight) = ones: averaged with rank 1's zeros, 0.5.
      EXPECT_LE((extra->weight.grad() - 0.5).abs().max().item<double>(), 1e-6) << "step " << step;
      EXPECT_LE((shared->weight.grad() - 1.0).abs().max().item<double>(), 1e-6) << "step " << step;
    }
  });
}

TEST(DistributedOptimizerTest, JoinKeepsRanksWithLessDataInStep) {
  auto store = createMemoryStore();
  std::vector<std::vector<::torch::Tensor>> finals(2);
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    auto model = makeModel();
    auto sgd = makeSgd(model);
    DistributedOptimizerOptions o;
    o.unevenInputs = true;
    DistributedOptimizer opt(comm, sgd, o);
    const Data data = makeData();
    const int steps = rank == 0 ? 3 : 1;
    for (int s = 0; s < steps; ++s) {
      opt.zeroGrad();
      ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, s * 4 + rank * 2, 2)),
                                            data.y.narrow(0, s * 4 + rank * 2, 2))
          .backward();
      opt.step();
    }
    opt.join();
    for (auto& p : model->parameters()) finals[static_cast<std::size_t>(rank)].push_back(p.detach().clone());
  });
  expectClose(finals[1], finals[0], 0, 1);
}

TEST(DistributedOptimizerTest, JoinWithoutUnevenInputsIsRejected) {
  auto comm = makeComm(createMemoryStore(), 0, 1);
  auto model = makeModel();
  DistributedOptimizer opt(comm, makeSgd(model));
  EXPECT_THROW(opt.join(), InvalidArgument);
}

TEST(DistributedOptimizerTest, ReportsBucketsAndTiming) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    DistributedOptimizerOptions o;
    o.bucketCapBytes = o.firstBucketCapBytes = 512;
    auto model = makeModel();
    const auto built = std::chrono::steady_clock::now();  // before the optimizer's first step begins
    DistributedOptimizer opt(comm, makeSgd(model), o);
    const auto buckets = opt.bucketBytes();
    EXPECT_GT(buckets.size(), 1u);
    std::size_t total = 0;
    for (auto b : buckets) total += b;
    std::size_t params = 0;
    for (auto& p : model->parameters()) params += static_cast<std::size_t>(p.numel()) * 4;
    EXPECT_EQ(total, params);
    for (int s = 0; s < 2; ++s) {
      opt.zeroGrad();
      model->forward(::torch::ones({2, 20})).sum().backward();
      opt.step();
      EXPECT_EQ(opt.lastStep().buckets, opt.bucketBytes().size());
      EXPECT_EQ(opt.lastStep().bytes, params);
      const double sinceBuilt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count();
      // step() waits for the last bucket's allreduce, run in it: both took time, and the wait is
      // part of the step, which is part of the time since the optimizer was built.
      EXPECT_GT(opt.lastStep().communicate, 0);
      EXPECT_GT(opt.lastStep().wait, 0);
      EXPECT_LE(opt.lastStep().wait, opt.lastStep().step);
      EXPECT_LE(opt.lastStep().step, sinceBuilt);
      EXPECT_NEAR(opt.lastStep().compute + opt.lastStep().wait, opt.lastStep().step, 1e-9);
    }
    EXPECT_EQ(opt.totals().steps, 2);
  });
}

// The buckets are planned once from rank 0's ready times (in the second step): every rank
// must end with the same layout, or their allreduces would not match.
TEST(DistributedOptimizerTest, PlannedBucketsAreTheSameOnEveryRank) {
  auto store = createMemoryStore();
  std::mutex mu;
  std::vector<std::vector<std::size_t>> layouts(3);
  runThreads(3, [&](int rank) {
    auto comm = makeComm(store, rank, 3);
    auto model = makeModel();
    DistributedOptimizerOptions o;
    o.bucketCapBytes = 1024;
    DistributedOptimizer opt(comm, makeSgd(model), o);
    for (int s = 0; s < 4; ++s) {
      opt.zeroGrad();
      // Ranks run at different speeds, so their own ready times differ.
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      model->forward(::torch::ones({2, 20}) * (rank + 1)).sum().backward();
      opt.step();
    }
    std::lock_guard<std::mutex> lock(mu);
    layouts[static_cast<std::size_t>(rank)] = opt.bucketBytes();
  });
  EXPECT_EQ(layouts[1], layouts[0]);
  EXPECT_EQ(layouts[2], layouts[0]);
  std::size_t total = 0;
  for (auto b : layouts[0]) {
    EXPECT_TRUE(b <= 1024u || b == 20 * 16 * 4u) << b;  // the first layer's weight is alone
    total += b;
  }
  EXPECT_EQ(total, (20 * 16 + 16 + 16 * 8 + 8 + 8 * 4 + 4) * 4u);
}

// One rank has nothing to reduce: gradients stay libtorch's own tensors, as without gyre.
TEST(DistributedOptimizerTest, OneRankLeavesGradientsToLibtorch) {
  auto comm = makeComm(createMemoryStore(), 0, 1);
  auto model = makeModel();
  DistributedOptimizer opt(comm, makeSgd(model));
  EXPECT_TRUE(opt.bucketBytes().empty());
  opt.zeroGrad();
  model->forward(::torch::ones({2, 20})).sum().backward();
  for (auto& p : model->parameters()) EXPECT_TRUE(p.grad().defined());
  opt.step();
  opt.zeroGrad();
  for (auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(DistributedOptimizerTest, RejectsBadOptions) {
  auto comm = makeComm(createMemoryStore(), 0, 1);
  auto model = makeModel();
  DistributedOptimizerOptions o;
  o.backwardPassesPerStep = 0;
  EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), o), InvalidArgument);
  EXPECT_THROW(DistributedOptimizer(nullptr, makeSgd(model)), InvalidArgument);
  EXPECT_THROW(torch::parseCompression("zip"), InvalidArgument);
  o = {};
  // Linear(20, 16) shrinks up to rank 8 ((16 + 20) 8 < 320): rank 9 compresses nothing, refused
  // with one rank too.
  torch::setCompression(o, "powersgd:9");
  EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), o), InvalidArgument);
  o.unevenInputs = true;
  torch::setCompression(o, "topk:0.1");
  EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), o), InvalidArgument);
}

// Sharded optimizer step (ZeRO stage 1): reduce-scatter, each rank steps its part, allgather.
// The result must be the one process's on the whole batch, for every world (3 does not divide
// the buckets: padding), bucket layout and elementwise optimizer, on every rank.
class ShardedStepTest : public ::testing::TestWithParam<std::tuple<int, std::size_t>> {};

TEST_P(ShardedStepTest, MatchesOneProcessOnTheWholeBatch) {
  const auto [size, capBytes] = GetParam();
  const MakeOptimizer makers[] = {
      [](::torch::nn::Sequential& m) -> std::shared_ptr<::torch::optim::Optimizer> {
        return std::make_shared<::torch::optim::SGD>(m->parameters(),
                                                     ::torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-2));
      },
      [](::torch::nn::Sequential& m) -> std::shared_ptr<::torch::optim::Optimizer> {
        return std::make_shared<::torch::optim::Adam>(m->parameters(), ::torch::optim::AdamOptions(1e-2));
      },
  };
  for (const auto& make : makers) {
    const auto want = referenceParameters(make);
    for (bool share : {true, false}) {  // one copy in shared memory, or private copies allgathered
      for (bool gradients : {false, true}) {  // ZeRO-2: only this rank's chunk of the gradients kept
        auto store = createMemoryStore();
        runThreads(size, [&](int rank) {
          auto comm = makeComm(store, rank, size);
          DistributedOptimizerOptions o;
          o.shardOptimizerState = true;
          o.shardGradients = gradients;
          // ZeRO-2 with gradients accumulated over 2 backward passes too, where the share halves.
          const int micro = gradients && (kBatch / size) % 2 == 0 ? 2 : 1;
          o.backwardPassesPerStep = micro;
          o.shareParametersOnHost = share;
          o.bucketCapBytes = capBytes;
          o.firstBucketCapBytes = std::min<std::size_t>(capBytes, 256);
          expectClose(trainDistributed(*comm, comm, o, micro, make), want, 1e-5, rank);
        });
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndBuckets, ShardedStepTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(std::size_t{64}, std::size_t{25} << 20)));

// Two groups with their own rates, and a schedule that changes the user's rates between steps:
// the shards step with the rates of the moment.
TEST(ShardedStepTest, FollowsTheGroupsAndTheirChangingRates) {
  auto makeGroups = [](::torch::nn::Sequential& m) -> std::shared_ptr<::torch::optim::Optimizer> {
    auto params = m->parameters();
    std::vector<::torch::Tensor> head(params.begin(), params.begin() + 3), tail(params.begin() + 3, params.end());
    std::vector<::torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(head, std::make_unique<::torch::optim::SGDOptions>(::torch::optim::SGDOptions(0.1).momentum(0.9)));
    groups.emplace_back(tail, std::make_unique<::torch::optim::SGDOptions>(::torch::optim::SGDOptions(0.3)));
    return std::make_shared<::torch::optim::SGD>(groups, ::torch::optim::SGDOptions(0.1));
  };
  auto train = [&](Communicator* comm, std::shared_ptr<Communicator> owned) {
    ::torch::set_num_threads(1);
    auto model = makeModel();
    auto optimizer = makeGroups(model);
    std::unique_ptr<DistributedOptimizer> opt;
    if (owned) {
      DistributedOptimizerOptions o;
      o.shardOptimizerState = true;
      o.bucketCapBytes = o.firstBucketCapBytes = 200;
      opt = std::make_unique<DistributedOptimizer>(owned, optimizer, o);
    }
    const Data data = makeData();
    const int size = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
    for (int s = 0; s < kSteps; ++s) {
      for (auto& group : optimizer->param_groups()) {
        auto& options = static_cast<::torch::optim::SGDOptions&>(group.options());
        options.lr(options.lr() * 0.5);
      }
      if (opt) opt->zeroGrad(); else optimizer->zero_grad();
      const int share = kBatch / size;
      const int begin = s * kBatch + rank * share;
      ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, begin, share)),
                                            data.y.narrow(0, begin, share))
          .backward();
      if (opt) opt->step(); else optimizer->step();
    }
    std::vector<::torch::Tensor> out;
    for (auto& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  };
  const auto want = train(nullptr, nullptr);
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    expectClose(train(comm.get(), comm), want, 1e-5, rank);
  });
}

// step() reduces only this rank's part; synchronize() hands every rank the whole average (also
// when only this rank's chunk of the gradients is kept, ZeRO-2).
TEST(ShardedStepTest, SynchronizeGathersTheAveragedGradients) {
  for (bool gradients : {false, true}) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    auto model = makeModel();
    DistributedOptimizerOptions o;
    o.shardOptimizerState = true;
    o.shardGradients = gradients;
    DistributedOptimizer opt(comm, makeSgd(model), o);
    opt.zeroGrad();
    model->forward(::torch::full({1, 20}, 1.0 + rank)).sum().backward();
    std::vector<::torch::Tensor> local;
    for (auto& p : model->parameters()) local.push_back(p.grad().clone());
    opt.synchronize();
    for (std::size_t i = 0; i < local.size(); ++i) {
      auto average = local[i].clone();
      comm->allreduce(average.data_ptr(), average.data_ptr(), static_cast<std::size_t>(average.numel()),
                      {DataType::kFloat32, ReduceOp::kAverage});
      EXPECT_LE((model->parameters()[i].grad() - average).abs().max().item<double>(), 1e-6) << "parameter " << i;
    }
    const auto timing = opt.lastStep();
    EXPECT_GT(timing.bytes, 0u);
  });
  }
}

// ZeRO-2: between steps a rank holds only its chunk of the reduced gradients (the parameters'
// grad() undefined), half what ZeRO-1 holds on 2 ranks, and trains the same model.
TEST(ShardedStepTest, ShardedGradientsKeepOnlyThisRanksChunk) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    std::size_t gradientBytes[2] = {0, 0};
    for (bool gradients : {false, true}) {
      auto model = makeModel();
      DistributedOptimizerOptions o;
      o.shardOptimizerState = true;
      o.shardGradients = gradients;
      o.bucketCapBytes = o.firstBucketCapBytes = 200;  // several buckets
      // Without momentum: the optimizer holds no state, so what is not parameters is gradients.
      DistributedOptimizer opt(comm, std::make_shared<::torch::optim::SGD>(model->parameters(), 0.1), o);
      std::size_t params = 0;
      for (auto& p : model->parameters()) params += static_cast<std::size_t>(p.nbytes());
      for (int step = 0; step < 2; ++step) {
        opt.zeroGrad();
        model->forward(::torch::full({2, 20}, 1.0 + rank)).sum().backward();
        opt.step();
      }
      for (auto& p : model->parameters()) EXPECT_EQ(p.grad().defined(), !gradients) << "rank " << rank;
      gradientBytes[gradients] = opt.stateBytes() - params;
    }
    EXPECT_GT(gradientBytes[0], 0u);
    EXPECT_LE(gradientBytes[1], gradientBytes[0] / 2 + 64) << "rank " << rank;  // padding of each bucket
    EXPECT_GE(gradientBytes[1], gradientBytes[0] / 2 - 64) << "rank " << rank;
  });
}

// Ranks on one host keep one copy of the parameters while the optimizer lives, and private ones
// after it (so plain training afterwards cannot write another rank's parameters).
TEST(ShardedStepTest, RanksOnOneHostShareOneCopyOfTheParameters) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 2);
    auto model = makeModel();
    auto first = model->parameters()[0];
    {
      DistributedOptimizerOptions o;
      o.shardOptimizerState = true;
      DistributedOptimizer opt(comm, makeSgd(model), o);
      ::torch::NoGradGuard noGrad;
      if (rank == 0) first.view(-1)[0].fill_(42.0);
      comm->barrier();
      EXPECT_EQ(first.view(-1)[0].item<float>(), 42.0f) << "rank " << rank;
      comm->barrier();
    }
    ::torch::NoGradGuard noGrad;
    if (rank == 1) first.view(-1)[0].fill_(7.0);
    comm->barrier();
    EXPECT_EQ(first.view(-1)[0].item<float>(), rank == 1 ? 7.0f : 42.0f) << "rank " << rank;
  });
}

TEST(ShardedStepTest, RefusesWhatItCannotShard) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto model = makeModel();
    DistributedOptimizerOptions o;
    o.shardOptimizerState = true;
    auto lbfgs = std::make_shared<::torch::optim::LBFGS>(model->parameters());
    EXPECT_THROW(DistributedOptimizer(comm, lbfgs, o), InvalidArgument);
    auto compressed = o;
    compressed.compression = torch::Compression::kFp16;
    EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), compressed), InvalidArgument);
    auto uneven = o;
    uneven.unevenInputs = true;
    EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), uneven), InvalidArgument);
    DistributedOptimizerOptions gradientsAlone;
    gradientsAlone.shardGradients = true;  // ZeRO-2 without stage 1
    EXPECT_THROW(DistributedOptimizer(comm, makeSgd(model), gradientsAlone), InvalidArgument);
  });
}

TEST(BroadcastTest, ParametersAndOptimizerStateComeFromTheRoot) {
  auto store = createMemoryStore();
  runThreads(3, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, 3);
    ::torch::manual_seed(100 + static_cast<std::uint64_t>(rank));  // different models everywhere
    ::torch::nn::Sequential model(::torch::nn::Linear(5, 3), ::torch::nn::BatchNorm1d(3));
    auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(), ::torch::optim::SGDOptions(rank + 1.0).momentum(0.5));
    if (rank == 1) {  // the root has momentum buffers; the others have none yet
      model->forward(::torch::randn({4, 5})).sum().backward();
      sgd->step();
    }
    torch::broadcastParameters(*model, *comm, 1);
    torch::broadcastOptimizerState(*sgd, *comm, 1);
    std::vector<::torch::Tensor> mine;
    for (auto& p : model->parameters()) mine.push_back(p.detach().clone());
    for (auto& b : model->buffers()) mine.push_back(b.detach().clone().to(::torch::kFloat32));
    for (auto& t : mine) {
      auto root = t.clone();
      comm->broadcast(root.data_ptr(), static_cast<std::size_t>(root.numel()), {DataType::kFloat32, 1});
      EXPECT_TRUE(root.equal(t)) << "rank " << rank;
    }
    EXPECT_DOUBLE_EQ(sgd->param_groups()[0].options().get_lr(), 2.0);
    EXPECT_EQ(sgd->state().size(), 4u) << "momentum buffers of the root's parameters";
  });
}

TEST(BroadcastTest, DifferentModelsAreNamedNotHung) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    ::torch::nn::Linear model(4, rank == 0 ? 2 : 3);
    EXPECT_THROW(torch::broadcastParameters(*model, *comm), InvalidArgument);
  });
}

TEST(TimelineTest, WritesOneTrackPerRankWithBucketsAndSteps) {
  test::TempDir dir;
  const std::string path = dir.path() + "/trace.json";
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto timeline = std::make_shared<torch::Timeline>(path, comm);
    DistributedOptimizerOptions o;
    o.timeline = timeline;
    auto model = makeModel();
    DistributedOptimizer opt(comm, makeSgd(model), o);
    for (int s = 0; s < 2; ++s) {
      torch::Timeline::Scope forward(timeline.get(), "forward");
      opt.zeroGrad();
      model->forward(::torch::ones({2, 20})).sum().backward();
      opt.step();
    }
    timeline->write();
  });
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const auto trace = nlohmann::json::parse(in);
  std::map<std::pair<int, std::string>, int> seen;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") ++seen[{e.at("pid").get<int>(), e.at("name").get<std::string>()}];
  for (int rank = 0; rank < 2; ++rank) {
    for (const char* name : {"backward", "allreduce", "wait", "optimizer step", "forward"})
      EXPECT_GE((seen[{rank, name}]), 2) << "rank " << rank << " " << name;
  }
}

}  // namespace
}  // namespace gyre
