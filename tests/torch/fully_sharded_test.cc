// FullyShardedModel (ZeRO stage 3): training on W ranks equals one process on the whole batch;
// each rank holds only its shard between steps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "gyre/torch/fully_sharded.h"
#include "gyre/torch/module.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre {
namespace fully_sharded_test {

using test::makeComm;
using test::runThreads;
using torch::FullyShardedModel;

constexpr int kSteps = 5;
constexpr int kBatch = 12;  // divides 1, 2, 3 and 4 ranks

// A module with a linear layer that the forward pass never uses: its parameters get no gradient.
class SkipsOneImpl : public ::torch::nn::Module {
 public:
  SkipsOneImpl() {
    used = register_module("used", ::torch::nn::Linear(16, 16));
    unused = register_module("unused", ::torch::nn::Linear(16, 16));
  }
  ::torch::Tensor forward(const ::torch::Tensor& x) { return used->forward(x); }
  ::torch::nn::Linear used{nullptr}, unused{nullptr};
};
GYRE_TORCH_MODULE(SkipsOne);

::torch::nn::Sequential makeShardedTestModel() {
  ::torch::manual_seed(7);
  return ::torch::nn::Sequential(::torch::nn::Linear(8, 16), ::torch::nn::ReLU(), SkipsOne(), ::torch::nn::Tanh(),
                                 ::torch::nn::Linear(16, 5), ::torch::nn::LayerNorm(::torch::nn::LayerNormOptions({5})),
                                 ::torch::nn::Linear(5, 3));
}

// One model per rank, made here: the ranks' threads share libtorch's generator.
std::vector<::torch::nn::Sequential> shardedTestModels(int size) {
  std::vector<::torch::nn::Sequential> models;
  for (int r = 0; r < size; ++r) models.push_back(makeShardedTestModel());
  return models;
}

struct ShardedTestData {
  ::torch::Tensor x, y;
};

ShardedTestData makeShardedTestData() {
  ::torch::manual_seed(11);
  return {::torch::randn({kSteps * kBatch, 8}), ::torch::randint(0, 3, {kSteps * kBatch})};
}

using MakeShardOptimizer = std::function<std::shared_ptr<::torch::optim::Optimizer>(std::vector<::torch::Tensor>)>;

std::vector<MakeShardOptimizer> shardOptimizers() {
  return {
      [](std::vector<::torch::Tensor> p) -> std::shared_ptr<::torch::optim::Optimizer> {
        return std::make_shared<::torch::optim::SGD>(std::move(p), ::torch::optim::SGDOptions(0.1).momentum(0.9));
      },
      [](std::vector<::torch::Tensor> p) -> std::shared_ptr<::torch::optim::Optimizer> {
        return std::make_shared<::torch::optim::Adam>(std::move(p), ::torch::optim::AdamOptions(1e-2));
      },
  };
}

// Every step's loss on the whole batch, and the final parameters, of one process.
std::vector<::torch::Tensor> trainWhole(const MakeShardOptimizer& make, std::vector<double>& losses) {
  ::torch::set_num_threads(1);
  auto model = makeShardedTestModel();
  auto optimizer = make(model->parameters());
  const ShardedTestData data = makeShardedTestData();
  for (int s = 0; s < kSteps; ++s) {
    optimizer->zero_grad();
    auto loss = ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, s * kBatch, kBatch)),
                                                       data.y.narrow(0, s * kBatch, kBatch));
    loss.backward();
    losses.push_back(loss.item<double>());
    optimizer->step();
  }
  std::vector<::torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(FullyShardedModel, TrainsAsOneProcessOnTheWholeBatch) {
  for (const auto& make : shardOptimizers()) {
    const ShardedTestData data = makeShardedTestData();
    std::vector<double> wantLosses;
    const auto want = trainWhole(make, wantLosses);
    for (int size : {2, 3, 4}) {
      for (bool prefetch : {true, false}) {
        auto store = createMemoryStore();
        const auto models = shardedTestModels(size);
        runThreads(size, [&](int rank) {
          ::torch::set_num_threads(1);
          auto comm = makeComm(store, rank, size);
          auto model = models[static_cast<std::size_t>(rank)];
          torch::FullyShardedOptions o;
          o.prefetch = prefetch;
          FullyShardedModel sharded(comm, model, o);
          auto optimizer = make(sharded.parameters());
          const int share = kBatch / size;
          for (int s = 0; s < kSteps; ++s) {
            sharded.zeroGrad();
            const int begin = s * kBatch + rank * share;
            auto loss = ::torch::nn::functional::cross_entropy(sharded.forward(data.x.narrow(0, begin, share)),
                                                               data.y.narrow(0, begin, share));
            loss.backward();
            sharded.synchronize();
            optimizer->step();
            // The mean of the ranks' losses is the whole batch's.
            std::vector<double> mean = {loss.item<double>() / size};
            comm->allreduce(mean.data(), mean.data(), 1, {DataType::kFloat64, ReduceOp::kSum});
            EXPECT_NEAR(mean[0], wantLosses[static_cast<std::size_t>(s)], 1e-5 * std::abs(wantLosses[s]))
                << "rank " << rank << " step " << s;
          }
          sharded.gatherParameters();
          std::vector<::torch::Tensor> got;
          for (const auto& p : model->parameters()) got.push_back(p.detach().clone());
          test::expectClose(got, want, 1e-5, "rank " + std::to_string(rank) + " of " + std::to_string(size));
        });
      }
    }
  }
}

TEST(FullyShardedModel, HoldsOnlyItsShardBetweenSteps) {
  constexpr int kSize = 4;
  auto store = createMemoryStore();
  const auto models = shardedTestModels(kSize);
  const ShardedTestData data = makeShardedTestData();
  runThreads(kSize, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, kSize);
    auto model = models[static_cast<std::size_t>(rank)];
    std::size_t whole = 0;
    for (const auto& p : model->parameters()) whole += static_cast<std::size_t>(p.nbytes());
    FullyShardedModel sharded(comm, model);
    EXPECT_EQ(sharded.fullParameterBytes(), whole);
    // Before and after a step: the shards alone (padding to a multiple of 4 ranks per unit), then
    // with their gradients.
    const std::size_t shards = sharded.stateBytes();
    EXPECT_GE(shards, whole / kSize);
    EXPECT_LE(shards, whole / kSize + 4 * 4 * sizeof(float));
    sharded.zeroGrad();
    ::torch::nn::functional::cross_entropy(sharded.forward(data.x.narrow(0, 0, 3)), data.y.narrow(0, 0, 3))
        .backward();
    sharded.synchronize();
    EXPECT_EQ(sharded.stateBytes(), 2 * shards);
    for (const auto& p : model->parameters()) {
      EXPECT_EQ(p.storage().nbytes(), 0u) << "a full parameter kept its memory";
      EXPECT_FALSE(p.grad().defined());
    }
    for (const auto& shard : sharded.parameters()) EXPECT_TRUE(shard.grad().defined());
  });
}

// A model no rank made whole: each child's shard taken as it is made (takeShard), the model
// sharded from them, computes what the model made whole and sharded computes; gathered onto
// rank 0 alone, the whole model is there and nowhere else.
TEST(FullyShardedModel, AModelMadeInShardsIsTheWholeModelSharded) {
  constexpr int kSize = 3;
  auto store = createMemoryStore();
  const auto wholes = shardedTestModels(kSize);
  const auto parts = shardedTestModels(2 * kSize);  // the second half stays whole: the reference
  const ShardedTestData data = makeShardedTestData();
  runThreads(kSize, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, kSize);
    ::torch::nn::Sequential made = parts[static_cast<std::size_t>(rank)];
    std::vector<::torch::Tensor> shards;
    for (const auto& child : made->children())
      if (::torch::Tensor shard = torch::takeShard(*child, rank, kSize); shard.defined()) shards.push_back(shard);
    for (const auto& p : made->parameters()) EXPECT_EQ(p.storage().nbytes(), 0u) << "a parameter kept its memory";
    FullyShardedModel fromShards(comm, made, shards);
    FullyShardedModel fromWhole(comm, wholes[static_cast<std::size_t>(rank)]);
    const std::vector<::torch::Tensor> a = fromShards.parameters(), b = fromWhole.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(::torch::equal(a[k], b[k])) << "shard " << k;
    {
      ::torch::NoGradGuard noGrad;
      EXPECT_TRUE(::torch::equal(fromShards.forward(data.x), fromWhole.forward(data.x)));
    }
    fromShards.gatherParametersOnto(0);
    const std::vector<::torch::Tensor> reference = parts[static_cast<std::size_t>(kSize + rank)]->parameters();
    const std::vector<::torch::Tensor> gathered = made->parameters();
    for (std::size_t k = 0; k < gathered.size(); ++k) {
      if (rank == 0) {
        EXPECT_TRUE(::torch::equal(gathered[k], reference[k])) << "parameter " << k;
      } else {
        EXPECT_EQ(gathered[k].storage().nbytes(), 0u) << "parameter " << k << " on rank " << rank;
      }
    }
  });
  EXPECT_THROW(torch::takeShard(*::torch::nn::Linear(2, 2), 2, 2), Error);
}

TEST(FullyShardedModel, EvaluatesWithoutGradientsAsTheWholeModel) {
  constexpr int kSize = 2;
  auto reference = makeShardedTestModel();
  const ShardedTestData data = makeShardedTestData();
  const ::torch::Tensor want = reference->forward(data.x).detach();
  auto store = createMemoryStore();
  const auto models = shardedTestModels(kSize);
  runThreads(kSize, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, kSize);
    auto model = models[static_cast<std::size_t>(rank)];
    FullyShardedModel sharded(comm, model);
    ::torch::NoGradGuard noGrad;
    EXPECT_LE(test::maxDiff(sharded.forward(data.x), want), 1e-6) << "rank " << rank;
    for (const auto& p : model->parameters()) EXPECT_EQ(p.storage().nbytes(), 0u);
  });
}

TEST(FullyShardedModel, RefusesParametersThatAreNotFloat32) {
  auto store = createMemoryStore();
  const auto models = shardedTestModels(2);
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    auto model = models[static_cast<std::size_t>(rank)];
    model->to(::torch::kFloat64);
    try {
      FullyShardedModel sharded(comm, model);
      ADD_FAILURE() << "a float64 model was sharded";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("shards float32 parameters"), std::string::npos) << e.what();
    }
  });
}

}  // namespace fully_sharded_test
}  // namespace gyre
