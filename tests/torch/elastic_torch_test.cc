// Elastic training on libtorch: ElasticSampler's batches and weights for any world size,
// TorchState's commit/restore, and a model trained under elastic::run by two workers that a third
// joins: every worker ends with the same parameters as a single process that trained the same
// global batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <thread>

#include "elastic/membership.h"
#include "gyre/torch.h"
#include "support/ranks.h"

namespace gyre::torch {
namespace {

using namespace std::chrono_literals;
using Indices = std::vector<std::int64_t>;

Indices sorted(Indices v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ElasticSampler, AnyWorldSplitsEachGlobalBatchExactlyAndWeighsTheShares) {
  ElasticSampler one(1000, 128, 7);
  for (int world : {1, 2, 3, 5}) {
    for (std::int64_t step : {0, 3}) {
      one.setStep(step);
      Indices all;
      double weights = 0;
      for (int r = 0; r < world; ++r) {
        ElasticSampler s(1000, 128, 7);
        s.setWorld(r, world);
        s.setStep(step);
        const Indices mine = s.batch();
        // rank r's share of the global mean: |mine| / 128 = weight / world
        EXPECT_DOUBLE_EQ(s.weight() / world, static_cast<double>(mine.size()) / 128.0);
        weights += s.weight();
        all.insert(all.end(), mine.begin(), mine.end());
      }
      EXPECT_EQ(sorted(all), sorted(one.batch())) << "world " << world << " step " << step;
      EXPECT_DOUBLE_EQ(weights, world);
    }
  }
  EXPECT_EQ(one.stepsPerEpoch(), 1000 / 128);
}

TEST(ElasticSampler, MatchesDistributedSamplerWhenTheWorldDividesTheBatch) {
  DistributedSamplerOptions o;
  o.seed = 3;
  DistributedSampler shard(960, 4, 1, o);
  shard.setEpoch(2);
  const Indices expected = shard.indices();
  ElasticSampler s(960, 64, 3);
  s.setWorld(1, 4);
  s.setEpoch(2);
  for (std::int64_t step = 0; step < 3; ++step, s.advance()) {
    const Indices mine = s.batch();
    EXPECT_EQ(mine, Indices(expected.begin() + step * 16, expected.begin() + (step + 1) * 16));
    EXPECT_EQ(s.weight(), 1.0);
  }
  EXPECT_THROW(s.setWorld(4, 4), InvalidArgument);
  EXPECT_THROW(ElasticSampler(10, 11, 0), InvalidArgument);
}

// Fixed shards: every world that divides them takes the same shards (the same samples in the
// same order, whoever holds them), the full world's ranks one each (as batch() without shards), and
// the weights sum to the world; a world that does not divide them falls back to batch().
TEST(ElasticSampler, ShardsAreTheSameInEveryWorldThatDividesThem) {
  const auto shardsOf = [](int world, std::int64_t step) {
    std::vector<ElasticSampler::Part> all;
    double weights = 0;
    for (int r = 0; r < world; ++r) {
      ElasticSampler s(1000, 128, 7);
      s.setShards(4);
      s.setWorld(r, world);
      s.setStep(step);
      for (ElasticSampler::Part& p : s.parts()) {
        weights += p.weight;
        all.push_back(std::move(p));
      }
    }
    EXPECT_DOUBLE_EQ(weights, world) << "world " << world;
    return all;
  };
  for (const std::int64_t step : {0, 5}) {
    const std::vector<ElasticSampler::Part> four = shardsOf(4, step);
    ASSERT_EQ(four.size(), 4u);
    for (const int world : {1, 2}) {
      const std::vector<ElasticSampler::Part> fewer = shardsOf(world, step);
      ASSERT_EQ(fewer.size(), 4u) << "world " << world;
      for (std::size_t v = 0; v < 4; ++v) {
        EXPECT_EQ(fewer[v].indices, four[v].indices) << "world " << world << " shard " << v;
        EXPECT_DOUBLE_EQ(fewer[v].weight * 4, world) << "world " << world;  // 1 / (4 / W)
      }
    }
    // In the full world each rank's one shard is its batch() without shards.
    for (int r = 0; r < 4; ++r) {
      ElasticSampler plain(1000, 128, 7);
      plain.setWorld(r, 4);
      plain.setStep(step);
      EXPECT_EQ(four[static_cast<std::size_t>(r)].indices, plain.batch());
    }
    // 3 does not divide 4: one part per rank, its batch() and weight().
    const std::vector<ElasticSampler::Part> three = shardsOf(3, step);
    ASSERT_EQ(three.size(), 3u);
    Indices all;
    for (const auto& p : three) all.insert(all.end(), p.indices.begin(), p.indices.end());
    Indices every;
    for (const auto& p : four) every.insert(every.end(), p.indices.begin(), p.indices.end());
    EXPECT_EQ(sorted(all), sorted(every));
  }
  ElasticSampler s(1000, 128, 7);
  EXPECT_THROW(s.setShards(129), InvalidArgument);
  EXPECT_THROW(s.setShards(-1), InvalidArgument);
}

// An epoch through a lost worker and a joiner, as gyre train runs it: 2 workers commit every 4
// steps, one is lost after step 10 (the survivor rolls back to the commit at step 8 and goes on
// alone), a replacement joins at the commit of step 16. The steps of the final trajectory (a
// rolled-back step is trained again) cover every sample of the epoch exactly once.
TEST(ElasticSampler, AnEpochThroughALostWorkerAndAJoinerTrainsEachSampleOnce) {
  constexpr std::int64_t kSamples = 24 * 40, kBatch = 40;
  std::map<std::int64_t, Indices> trained;  // step -> the samples of its final training
  std::int64_t committed = 0;
  const auto train = [&](int world, std::int64_t from, std::int64_t until) {
    std::vector<ElasticSampler> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.emplace_back(kSamples, kBatch, 9);
      ranks.back().setShards(2);
      ranks.back().setWorld(r, world);
      ranks.back().setEpoch(0);
      ranks.back().setStep(from);  // what TorchState restores from the commit
    }
    for (std::int64_t step = from; step < until; ++step) {
      Indices all;
      for (ElasticSampler& s : ranks) {
        for (const ElasticSampler::Part& p : s.parts()) all.insert(all.end(), p.indices.begin(), p.indices.end());
        s.advance();
      }
      trained[step] = all;  // a rolled-back step's earlier training is replaced
      if ((step + 1) % 4 == 0) committed = step + 1;
    }
  };
  train(2, 0, 10);  // worker 1 is lost after step 10: the last commit was at step 8
  ASSERT_EQ(committed, 8);
  train(1, committed, 16);
  train(2, 16, kSamples / kBatch);
  Indices all;
  for (const auto& [step, samples] : trained) all.insert(all.end(), samples.begin(), samples.end());
  Indices every(kSamples);
  std::iota(every.begin(), every.end(), 0);
  EXPECT_EQ(sorted(all), every);
  EXPECT_EQ(trained.size(), static_cast<std::size_t>(kSamples / kBatch));
}

::torch::nn::Sequential tinyModel() {
  ::torch::manual_seed(0);
  return ::torch::nn::Sequential(::torch::nn::Linear(4, 8), ::torch::nn::ReLU(), ::torch::nn::Linear(8, 3));
}

std::vector<::torch::Tensor> copies(::torch::nn::Module& m) {
  std::vector<::torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(TorchState, RestoreBringsBackTheCommittedModelOptimizerAndSampler) {
  auto model = tinyModel();
  auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
  ElasticSampler sampler(100, 10, 1);
  TorchState state(model.ptr(), sgd, &sampler);
  const auto trainStep = [&] {
    sgd->zero_grad();
    model->forward(::torch::ones({2, 4})).sum().backward();
    sgd->step();
    sampler.advance();
  };
  trainStep();
  state.commit();
  const auto committed = copies(*model);
  trainStep();
  const auto afterOne = copies(*model);
  trainStep();
  sampler.setEpoch(3);
  state.restore();
  for (std::size_t i = 0; i < committed.size(); ++i) EXPECT_TRUE(model->parameters()[i].equal(committed[i]));
  EXPECT_EQ(sampler.epoch(), 0);
  EXPECT_EQ(sampler.step(), 1);
  // The momentum came back too: the same step again gives the same parameters.
  trainStep();
  for (std::size_t i = 0; i < afterOne.size(); ++i) EXPECT_TRUE(model->parameters()[i].allclose(afterOne[i]));
}

// A commit taken before the first step has no momentum: restoring it drops the momentum the
// steps after it built (the optimizer's load alone keeps state the commit did not have).
TEST(TorchState, RestoreToACommitWithoutOptimizerStateDropsTheStateBuiltSince) {
  auto model = tinyModel();
  auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(),
                                                   ::torch::optim::SGDOptions(0.1).momentum(0.9));
  TorchState state(model.ptr(), sgd, nullptr);
  const auto trainStep = [&] {
    sgd->zero_grad();
    model->forward(::torch::ones({2, 4})).sum().backward();
    sgd->step();
  };
  state.commit();
  trainStep();
  const auto afterFirst = copies(*model);
  trainStep();
  ASSERT_FALSE(sgd->state().empty());
  state.restore();
  EXPECT_TRUE(sgd->state().empty());
  trainStep();  // the first step again, from no momentum: the same parameters
  const auto again = copies(*model);
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_TRUE(again[i].equal(afterFirst[i])) << i;
}

struct Data {
  ::torch::Tensor inputs, labels;
};

// A fixed random data set, drawn before any thread starts (the generator is process-wide).
Data randomData() {
  ::torch::manual_seed(1);
  return {::torch::randn({240, 4}), ::torch::randint(0, 3, {240})};
}

// Trains `steps` global steps of batch 12 with SGD under elastic::run, committing every 3 steps;
// `hold` runs after each step.
void trainElastic(const gyre::elastic::Options& options, ::torch::nn::Sequential& model, const Data& data,
                  int steps, const std::function<void(Communicator&, std::int64_t)>& hold) {
  const auto& [inputs, labels] = data;
  auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(), ::torch::optim::SGDOptions(0.05).momentum(0.5));
  ElasticSampler sampler(240, 12, 5);
  TorchState state(model.ptr(), sgd, &sampler);
  state.values["step"] = 0;
  state.onReset([&](Communicator& c) { sampler.setWorld(c.rank(), c.size()); });
  gyre::elastic::run(
      state,
      [&](const std::shared_ptr<Communicator>& comm) {
        DistributedOptimizer opt(comm, sgd);
        while (state.values["step"] < steps) {
          Indices mine = sampler.batch();
          const auto index = ::torch::from_blob(mine.data(), {static_cast<std::int64_t>(mine.size())}, ::torch::kInt64);
          opt.zeroGrad();
          const auto loss =
              ::torch::nn::functional::cross_entropy(model->forward(inputs.index_select(0, index)),
                                                     labels.index_select(0, index));
          (loss * sampler.weight()).backward();
          opt.step();
          sampler.advance();
          if (sampler.epochDone()) sampler.setEpoch(sampler.epoch() + 1);
          const std::int64_t step = ++state.values["step"];
          if (hold) hold(*comm, step);
          if (step % 3 == 0) state.commit();
        }
      },
      options);
}

constexpr int kSteps = 30;

gyre::elastic::Options workerOptions(const std::shared_ptr<Store>& store, int id) {
  gyre::elastic::Options o;
  o.store = store;
  o.workerId = id;
  o.timeout = 20s;
  o.communicator.transport = Transport::kTcp;
  return o;
}

// The model one worker alone trains.
std::vector<::torch::Tensor> trainedAlone(const Data& data) {
  gyre::elastic::Options alone;
  alone.store = createMemoryStore();
  alone.workerId = 0;
  alone.timeout = 20s;
  gyre::elastic::publishMembership(*alone.store, {1, {0}});
  auto reference = tinyModel();
  trainElastic(alone, reference, data, kSteps, {});
  return copies(*reference);
}

void expectAllClose(const std::vector<::torch::Tensor>& got, const std::vector<::torch::Tensor>& expected,
                    const std::string& who) {
  ASSERT_EQ(got.size(), expected.size()) << who;
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(got[i].allclose(expected[i], 1e-5, 1e-6)) << who << " parameter " << i;
}

TEST(ElasticTraining, SurvivorsOfALostWorkerEndWithTheSameModelAsOneProcess) {
  const Data data = randomData();
  const auto expected = trainedAlone(data);
  auto store = createMemoryStore();
  gyre::elastic::publishMembership(*store, {1, {0, 1, 2}});
  std::vector<::torch::nn::Sequential> models;
  for (int id = 0; id < 3; ++id) models.push_back(tinyModel());
  struct Died {};
  test::runThreads(3, [&](int id) {
    const gyre::elastic::Options o = workerOptions(store, id);
    try {
      trainElastic(o, models[static_cast<std::size_t>(id)], data, kSteps, [&](Communicator&, std::int64_t step) {
        if (id == 1 && step == 17) throw Died{};  // two steps after commit 5: rolled back
      });
    } catch (const Died&) {
      gyre::elastic::publishMembership(*store, {2, {0, 2}});
      return;
    }
    expectAllClose(copies(*models[static_cast<std::size_t>(id)]), expected, "worker " + std::to_string(id));
  });
}

TEST(ElasticTraining, AJoiningWorkerEndsWithTheSameModelAsOneProcess) {
  const Data data = randomData();
  const auto expected = trainedAlone(data);
  std::vector<::torch::nn::Sequential> models;
  for (int id = 0; id < 3; ++id) models.push_back(tinyModel());

  auto store = createMemoryStore();
  gyre::elastic::publishMembership(*store, {1, {0, 1}});
  std::atomic<bool> admitted{false};
  auto launcher = test::spawn([&] {
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!gyre::elastic::isReady(*store, 2) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(2ms);
    gyre::elastic::publishMembership(*store, {2, {0, 1, 2}});
    admitted = true;
  });
  std::vector<std::vector<::torch::Tensor>> finals(3);
  test::runThreads(3, [&](int id) {
    const gyre::elastic::Options o = workerOptions(store, id);
    auto& model = models[static_cast<std::size_t>(id)];
    trainElastic(o, model, data, kSteps, [&](Communicator&, std::int64_t step) {
      // The first two wait at step 10 until the third is admitted, so it joins mid-run.
      if (id != 2 && step == 10) {
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (!admitted && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      }
    });
    finals[static_cast<std::size_t>(id)] = copies(*model);
  });
  launcher.join();
  for (int id = 0; id < 3; ++id) expectAllClose(finals[static_cast<std::size_t>(id)], expected, "worker " + std::to_string(id));
}

}  // namespace
}  // namespace gyre::torch
