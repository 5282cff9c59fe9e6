// Different models on different ranks: every rank's DistributedOptimizer (and broadcastParameters)
// throws InvalidArgument naming the first parameter that differs and the ranks that differ,
// checked always at construction, whatever the difference: count, shape, dtype, order, none at
// all; in worlds of 2 and 3 where one rank differs. No rank may hang or get another error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

#include "gyre/gyre.h"
#include "gyre/torch/broadcast.h"
#include "gyre/torch/distributed_optimizer.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using test::runThreads;
using torch::DistributedOptimizer;
using torch::DistributedOptimizerOptions;

using test::makeComm;

// Parameters [3, 4] [3] [2, 3] [2], all float.
std::vector<::torch::Tensor> baseParameters() {
  return ::torch::nn::Sequential(::torch::nn::Linear(4, 3), ::torch::nn::Linear(3, 2))->parameters();
}

struct Case {
  std::string name;
  // The odd rank's parameters.
  std::function<std::vector<::torch::Tensor>()> odd;
  // In the message: the first parameter that differs, on the odd rank and on the others.
  std::string index;
  std::string oddHas;
  std::string othersHave;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

std::vector<Case> cases() {
  return {
      {"FewerParameters", [] { return ::torch::nn::Sequential(::torch::nn::Linear(4, 3))->parameters(); },
       "parameter 2", "none", "[2, 3] Float"},
      {"SameCountOtherShape",
       [] {
         return ::torch::nn::Sequential(::torch::nn::Linear(4, 3), ::torch::nn::Linear(3, 5))->parameters();
       },
       "parameter 2", "[5, 3] Float", "[2, 3] Float"},
      {"SameShapesOtherDtype",
       [] {
         ::torch::nn::Sequential m(::torch::nn::Linear(4, 3), ::torch::nn::Linear(3, 2));
         m->to(::torch::kFloat64);
         return m->parameters();
       },
       "parameter 0", "[3, 4] Double", "[3, 4] Float"},
      {"SameShapesOtherOrder",
       [] {
         auto p = baseParameters();
         std::swap(p[0], p[2]);
         std::swap(p[1], p[3]);
         return p;
       },
       "parameter 0", "[2, 3] Float", "[3, 4] Float"},
      {"NoParameters", [] { return std::vector<::torch::Tensor>{}; }, "parameter 0", "none", "[3, 4] Float"},
  };
}

// (case, {world, the odd rank})
class DifferentModelsTest : public ::testing::TestWithParam<std::tuple<Case, std::pair<int, int>>> {};

// Every rank throws InvalidArgument, and its message names what differs where.
void expectNamed(const std::function<void()>& construct, const Case& c, int rank, int world, int odd) {
  try {
    construct();
    ADD_FAILURE() << "rank " << rank << ": no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    std::string others = world == 2 ? "rank " + std::to_string(1 - odd) : "ranks ";
    if (world == 3) {
      for (int r = 0, n = 0; r < 3; ++r)
        if (r != odd) others += (n++ ? ", " : "") + std::to_string(r);
    }
    const std::string expected[] = {
        "rank " + std::to_string(odd) + " differs from " + others + ".",
        c.index + ": " + c.oddHas + " on rank " + std::to_string(odd) + ", " + c.othersHave + " on rank ",
        "rank " + std::to_string(rank) + " (this rank)",
    };
    for (const std::string& part : expected)
      EXPECT_NE(m.find(part), std::string::npos) << "rank " << rank << ": '" << part << "' not in: " << m;
  }
}

TEST_P(DifferentModelsTest, EveryRankThrowsNamingTheFirstDifference) {
  const Case& c = std::get<0>(GetParam());
  const auto [world, odd] = std::get<1>(GetParam());
  auto store = createMemoryStore();
  runThreads(world, [&](int rank) {
    auto comm = makeComm(store, rank, world);
    const auto params = rank == odd ? c.odd() : baseParameters();
    auto sgd = std::make_shared<::torch::optim::SGD>(params, ::torch::optim::SGDOptions(0.1));
    expectNamed([&] { DistributedOptimizer(comm, sgd); }, c, rank, world, odd);
    // The communicator is still in step: every rank made the same calls.
    float one = 1;
    comm->allreduce(&one, &one, 1);
    EXPECT_EQ(one, static_cast<float>(world));
  });
}

std::string caseName(const ::testing::TestParamInfo<DifferentModelsTest::ParamType>& param) {
  const auto& [c, worldAndOdd] = param.param;
  return c.name + "_World" + std::to_string(worldAndOdd.first) + "_OddRank" +
         std::to_string(worldAndOdd.second);
}

// In a world of 2 neither side is the majority: rank 0's is the reference.
INSTANTIATE_TEST_SUITE_P(Cases, DifferentModelsTest,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values(std::pair{2, 1}, std::pair{3, 0},
                                                              std::pair{3, 2})),
                         caseName);

TEST(ParameterCheckTest, ShardedWithAnotherDtypeOnOneRankThrowsEverywhere) {
  // Before the check, the float64 rank refused alone and the other waited for it.
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = makeComm(store, rank, 2);
    ::torch::nn::Linear model(4, 3);
    if (rank == 1) model->to(::torch::kFloat64);
    DistributedOptimizerOptions o;
    o.shardOptimizerState = true;
    auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(), ::torch::optim::SGDOptions(0.1));
    try {
      DistributedOptimizer opt(comm, sgd, o);
      ADD_FAILURE() << "rank " << rank << ": no error";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("[3, 4] Double on rank 1, [3, 4] Float on rank 0"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(ParameterCheckTest, SameModelsPassWithOneCheck) {
  auto store = createMemoryStore();
  runThreads(3, [&](int rank) {
    auto comm = makeComm(store, rank, 3);
    auto sgd = std::make_shared<::torch::optim::SGD>(baseParameters(), ::torch::optim::SGDOptions(0.1));
    DistributedOptimizer opt(comm, sgd);
    EXPECT_FALSE(opt.bucketBytes().empty());
  });
}

TEST(ParameterCheckTest, BroadcastParametersNamesTheParameter) {
  auto store = createMemoryStore();
  runThreads(3, [&](int rank) {
    auto comm = makeComm(store, rank, 3);
    ::torch::nn::Sequential model(::torch::nn::Linear(4, 3), ::torch::nn::Linear(3, rank == 2 ? 5 : 2));
    try {
      torch::broadcastParameters(*model, *comm);
      ADD_FAILURE() << "rank " << rank << ": no error";
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      for (const std::string part : {"rank 2 differs from ranks 0, 1.",
                                     "parameter 2 ('1.weight'): [5, 3] Float on rank 2, [2, 3] Float"})
        EXPECT_NE(m.find(part), std::string::npos) << "rank " << rank << ": '" << part << "' not in: " << m;
    }
  });
}

}  // namespace
}  // namespace gyre
