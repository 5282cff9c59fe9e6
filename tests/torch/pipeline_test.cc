// Pipeline parallelism: the schedules' orders, that every rank's plan of exchanges finishes
// (walked with unbuffered sends, for p up to 5 and m up to 9), stage balancing, and training:
// p ranks (threads) of a pipeline run 20 SGD steps whose losses and parameters equal those of
// the unsplit model on one thread, for every schedule, p = 2 and 4, m not a multiple of p.
#include "gyre/torch/pipeline.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "gyre/gyre.h"
#include "support/ranks.h"
#include "torch/pipeline_plan.h"

namespace gyre::torch {
namespace {

namespace nn = ::torch::nn;
using ::torch::Tensor;
using Kind = PipelineAction::Kind;

std::string orderOf(const std::vector<PipelineAction>& actions) {
  std::string text;
  for (const PipelineAction& a : actions) text += (text.empty() ? "" : " ") + toString(a);
  return text;
}

TEST(PipelineSchedules, HaveTheirOrders) {
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kGPipe, 0, 2, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kOneFOneB, 0, 2, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kOneFOneB, 1, 2, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kOneFOneB, 0, 4, 2)), "F0 F1 B0 B1");
  // Rank 0 of 2 defers each weight gradient by one micro-batch; the last rank by none.
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kZeroBubble, 0, 2, 3)), "F0 F1 I0 F2 I1 W0 I2 W1 W2");
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kZeroBubble, 1, 2, 3)), "F0 I0 W0 F1 I1 W1 F2 I2 W2");
  EXPECT_EQ(orderOf(pipelineActions(PipelineSchedule::kInterleaved, 1, 2, 2, 2)), "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
}

TEST(PipelineSchedules, RunEveryMicroBatchOnEveryStageOnceInOrder) {
  for (const PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB,
                                   PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubble})
    for (int p = 1; p <= 5; ++p)
      for (int v = 1; v <= (s == PipelineSchedule::kInterleaved ? 3 : 1); ++v)
        for (int m = 1; m <= 9; ++m) {
          if (s == PipelineSchedule::kInterleaved && m % p != 0) continue;
          const std::string what = std::string(toString(s)) + " p=" + std::to_string(p) + " v=" +
                                   std::to_string(v) + " m=" + std::to_string(m);
          for (int r = 0; r < p; ++r) {
            std::map<std::tuple<int, int, int>, int> at;  // (kind, micro-batch, chunk) -> position
            const auto actions = pipelineActions(s, r, p, m, v);
            for (std::size_t i = 0; i < actions.size(); ++i) {
              const auto& a = actions[i];
              EXPECT_TRUE(at.emplace(std::tuple{static_cast<int>(a.kind), a.microBatch, a.chunk}, int(i)).second)
                  << what << ": " << toString(a) << " twice";
            }
            const bool split = s == PipelineSchedule::kZeroBubble;
            EXPECT_EQ(actions.size(), static_cast<std::size_t>(m * v * (split ? 3 : 2))) << what;
            for (int i = 0; i < m; ++i)
              for (int c = 0; c < v; ++c) {
                const int f = at.at({int(Kind::kForward), i, c});
                const int b = at.at({int(split ? Kind::kBackwardInput : Kind::kBackward), i, c});
                EXPECT_LT(f, b) << what;
                if (split) {
                  EXPECT_LT(b, at.at({int(Kind::kBackwardWeight), i, c})) << what;
                }
              }
          }
          // Interleaved: with batched exchanges, two sends and two receives at once.
          EXPECT_EQ(pipeline::findDeadlock(s, p, m, v), "") << what;
        }
}

TEST(PipelineSchedules, RefuseWhatTheyCannotRun) {
  EXPECT_THROW(pipelineActions(PipelineSchedule::kOneFOneB, 0, 2, 0), InvalidArgument);
  EXPECT_THROW(pipelineActions(PipelineSchedule::kOneFOneB, 0, 2, 4, 2), InvalidArgument);
  EXPECT_THROW(pipelineActions(PipelineSchedule::kInterleaved, 0, 2, 3, 2), InvalidArgument);
  EXPECT_THROW(pipelineScheduleFrom("pipedream"), InvalidArgument);
  EXPECT_EQ(pipelineScheduleFrom("zero-bubble"), PipelineSchedule::kZeroBubble);
  EXPECT_DOUBLE_EQ(idealBubble(PipelineSchedule::kOneFOneB, 2, 4), 1.0 / 5);
  EXPECT_DOUBLE_EQ(idealBubble(PipelineSchedule::kInterleaved, 2, 4, 2), 1.0 / 9);
}

TEST(PipelineSchedules, TheBubbleOfMeasuredStageTimes) {
  // Equal stages: the formula.
  EXPECT_DOUBLE_EQ(stageTimesBubble({0.002, 0.002}, 4), idealBubble(PipelineSchedule::kOneFOneB, 2, 4));
  EXPECT_DOUBLE_EQ(stageTimesBubble({3, 3, 3, 3}, 8), idealBubble(PipelineSchedule::kGPipe, 4, 8));
  EXPECT_DOUBLE_EQ(stageTimesBubble({1, 1}, 4, 2), idealBubble(PipelineSchedule::kInterleaved, 2, 4, 2));
  // Ranks of 1 and 2 s per micro-batch, m = 4: a step of 4 × 2 + 1 = 9 s, of which the ranks
  // compute 4 and 8: idle 5/9 and 1/9.
  EXPECT_DOUBLE_EQ(stageTimesBubble({1, 2}, 4), (5.0 / 9 + 1.0 / 9) / 2);
  EXPECT_DOUBLE_EQ(stageTimesBubble({2, 1}, 4), stageTimesBubble({1, 2}, 4));
  EXPECT_DOUBLE_EQ(stageTimesBubble({5}, 3), 0.0);
  EXPECT_DOUBLE_EQ(stageTimesBubble({0, 0}, 3), 0.0);
  EXPECT_THROW(stageTimesBubble({}, 4), InvalidArgument);
  EXPECT_THROW(stageTimesBubble({1, -1}, 4), InvalidArgument);
  EXPECT_THROW(stageTimesBubble({1, 1}, 0), InvalidArgument);
}

TEST(PipelineBalance, EvenlyAndByCost) {
  EXPECT_EQ(balanceEvenly(8, 3), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(balanceByCost({1, 1, 1, 1, 4}, 2), (std::vector<int>{4, 1}));
  // Ties: any cut whose largest stage is the least will do.
  const std::vector<int> tied = balanceByCost({5, 1, 1, 1, 1, 1}, 3);
  ASSERT_EQ(tied.size(), 3u);
  EXPECT_EQ(tied[0], 1);
  EXPECT_LE(std::max(tied[1], tied[2]), 5);
  EXPECT_EQ(balanceByCost({0, 0, 0}, 3), (std::vector<int>{1, 1, 1}));
  EXPECT_THROW(balanceEvenly(2, 3), InvalidArgument);
  EXPECT_THROW(balanceByCost({1, -1}, 1), InvalidArgument);
  nn::Sequential layers(nn::Linear(2, 2), nn::Tanh(), nn::Linear(2, 2));
  EXPECT_THROW(stagesOf(layers, {1, 1}, 0, 2), InvalidArgument);  // 2 of the 3 layers
  EXPECT_THROW(stagesOf(layers, {2, 1, 0}, 0, 3), InvalidArgument);
  const auto stages = stagesOf(layers, {1, 2}, 1, 2);
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0]->size(), 2u);
  EXPECT_EQ(measureLayerSeconds(layers, ::torch::ones({4, 2})).size(), 3u);
}

// libtorch's generator is global: threads draw their models one at a time, each after the seed.
std::mutex drawing;

nn::Sequential model() {
  nn::Sequential layers;
  layers->push_back(nn::Linear(6, 16));
  for (int i = 0; i < 3; ++i) {
    layers->push_back(nn::Tanh());
    layers->push_back(nn::Linear(16, 16));
  }
  layers->push_back(nn::Linear(16, 3));
  return layers;  // 8 layers
}

Tensor lossOf(const Tensor& output, const Tensor& target) { return ::torch::mse_loss(output, target); }

struct PipelineBatch {
  Tensor input, target;
};

std::vector<PipelineBatch> batches(int steps, int size) {
  auto gen = ::at::detail::createCPUGenerator(5);
  std::vector<PipelineBatch> out;
  for (int i = 0; i < steps; ++i) out.push_back({::torch::randn({size, 6}, gen), ::torch::randn({size, 3}, gen)});
  return out;
}

struct PipelineCase {
  PipelineSchedule schedule;
  int p, m, v;
  bool recompute = false;
};

std::string nameOf(const ::testing::TestParamInfo<PipelineCase>& info) {
  std::string name = std::string(toString(info.param.schedule)) + "_p" + std::to_string(info.param.p) + "_m" +
                     std::to_string(info.param.m) + "_v" + std::to_string(info.param.v) +
                     (info.param.recompute ? "_recompute" : "");
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

class PipelineTraining : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineTraining, MatchesTheUnsplitModelStepForStep) {
  const PipelineCase c = GetParam();
  constexpr int kSteps = 20;
  const std::vector<PipelineBatch> data = batches(kSteps, 10);

  // The unsplit model on one thread: its losses and final parameters.
  nn::Sequential whole;
  {
    std::lock_guard lock(drawing);
    ::torch::manual_seed(1);
    whole = model();
  }
  std::vector<double> expectedLoss;
  {
    ::torch::optim::SGD sgd(whole->parameters(), ::torch::optim::SGDOptions(0.1));
    for (const PipelineBatch& b : data) {
      sgd.zero_grad();
      Tensor loss = lossOf(whole->forward(b.input), b.target);
      loss.backward();
      sgd.step();
      expectedLoss.push_back(loss.item<double>());
    }
  }
  const std::vector<int> balance = balanceEvenly(static_cast<int>(whole->size()), c.p * c.v);

  auto store = createMemoryStore();
  test::runThreads(c.p, [&](int rank) {
    auto comm = test::makeComm(store, rank, c.p);
    nn::Sequential mine;
    {
      std::lock_guard lock(drawing);
      ::torch::manual_seed(1);
      mine = model();
    }
    PipelineOptions options;
    options.schedule = c.schedule, options.microBatches = c.m, options.recompute = c.recompute;
    Pipeline pipe(stagesOf(mine, balance, rank, c.p), comm, options);
    EXPECT_EQ(pipe.stages().size(), static_cast<std::size_t>(c.v));
    ::torch::optim::SGD sgd(pipe.parameters(), ::torch::optim::SGDOptions(0.1));
    for (int step = 0; step < kSteps; ++step) {
      sgd.zero_grad();
      const double loss = pipe.step(data[step].input, data[step].target, lossOf);
      sgd.step();
      EXPECT_NEAR(loss, expectedLoss[static_cast<std::size_t>(step)], 1e-5 * std::abs(expectedLoss[step]) + 1e-7)
          << "rank " << rank << ", step " << step;
    }
    // This rank's layers (global stages rank, rank + p, ...) against the unsplit model's.
    std::size_t first = 0;
    for (std::size_t g = 0; g < balance.size(); ++g) {
      const auto count = static_cast<std::size_t>(balance[g]);
      if (static_cast<int>(g) % c.p == rank)
        for (std::size_t l = first; l < first + count; ++l) {
          const auto got = mine->ptr(l)->parameters(), want = whole->ptr(l)->parameters();
          for (std::size_t i = 0; i < got.size(); ++i)
            EXPECT_TRUE(::torch::allclose(got[i], want[i], 1e-5, 1e-6))
                << "rank " << rank << ", layer " << l << ": " << (got[i] - want[i]).abs().max().item<double>();
        }
      first += count;
    }
    const PipelineStepStats& stats = pipe.lastStep();
    EXPECT_GT(stats.seconds, 0);
    EXPECT_GE(stats.bubble(), 0);
    EXPECT_GT(stats.peakActivationBytes, 0);
    if (c.schedule == PipelineSchedule::kGPipe) {
      EXPECT_EQ(stats.peakHeld, c.m) << "rank " << rank;
    }
    if (c.schedule == PipelineSchedule::kOneFOneB) {
      EXPECT_LE(stats.peakHeld, c.p - rank) << "rank " << rank;
    }
    // Evaluation: the last rank gets the unsplit model's output.
    const Tensor out = pipe.forward(data[0].input);
    if (pipe.holdsLastStage()) {
      ::torch::NoGradGuard noGrad;
      EXPECT_TRUE(::torch::allclose(out, whole->forward(data[0].input), 1e-5, 1e-6));
    } else {
      EXPECT_FALSE(out.defined());
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineTraining,
                         ::testing::Values(PipelineCase{PipelineSchedule::kGPipe, 2, 3, 1},
                                           PipelineCase{PipelineSchedule::kGPipe, 4, 5, 1},
                                           PipelineCase{PipelineSchedule::kOneFOneB, 2, 3, 1},
                                           PipelineCase{PipelineSchedule::kOneFOneB, 4, 6, 1},
                                           PipelineCase{PipelineSchedule::kOneFOneB, 4, 3, 1, true},
                                           PipelineCase{PipelineSchedule::kZeroBubble, 2, 3, 1},
                                           PipelineCase{PipelineSchedule::kZeroBubble, 4, 5, 1},
                                           PipelineCase{PipelineSchedule::kOneFOneB, 1, 3, 1},
                                           PipelineCase{PipelineSchedule::kInterleaved, 2, 4, 2},
                                           PipelineCase{PipelineSchedule::kInterleaved, 4, 4, 2},
                                           PipelineCase{PipelineSchedule::kInterleaved, 2, 6, 3, true},
                                           PipelineCase{PipelineSchedule::kInterleaved, 1, 3, 2}),
                         nameOf);

TEST(PipelineTraining, RefusesABatchSmallerThanItsMicroBatches) {
  auto store = createMemoryStore();
  auto comm = Communicator::create(store, 0, 1, CommunicatorOptions{});
  PipelineOptions options;
  options.microBatches = 4;
  Pipeline pipe({model()}, comm, options);
  EXPECT_THROW(pipe.step(::torch::ones({3, 6}), ::torch::ones({3, 3}), lossOf), InvalidArgument);
  options.schedule = PipelineSchedule::kGPipe;
  const std::vector<nn::Sequential> two = {model(), model()};  // 2 stages a rank need interleaved
  EXPECT_THROW(Pipeline(two, comm, options), InvalidArgument);
}

}  // namespace
}  // namespace gyre::torch
