// PSOptimizer: workers (threads) training a libtorch model through in-process parameter servers.
// Under bsp, W workers on shards of a batch must reach the parameters one process reaches with
// torch::optim::SGD on the whole batch; under asp and ssp a model must learn.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/ps.h"
#include "gyre/torch/ps_optimizer.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre {
namespace {

using test::runThreads;
using torch::PSOptimizer;
using torch::PSOptimizerOptions;

constexpr const char* kSecret = "ps-test-secret";
constexpr int kBatch = 12;
constexpr int kSteps = 5;
constexpr double kLr = 0.1;
constexpr float kMomentum = 0.9f;

// S servers on loopback, any free ports.
struct Servers {
  explicit Servers(int count) {
    for (int i = 0; i < count; ++i) {
      ps::ServerOptions o;
      o.index = i;
      o.numServers = count;
      o.bindAddress = "127.0.0.1";
      o.port = 0;
      o.secret = kSecret;
      o.timeout = std::chrono::seconds(60);
      servers.push_back(ps::Server::start(o));
      addresses.push_back(servers.back()->address());
    }
  }
  std::vector<std::unique_ptr<ps::Server>> servers;
  std::vector<std::string> addresses;
};

std::shared_ptr<ps::Worker> connect(const Servers& servers, int id, int count, const ps::TableSpec& spec) {
  ps::WorkerOptions o;
  o.workerId = id;
  o.numWorkers = count;
  o.servers = servers.addresses;
  o.secret = kSecret;
  o.timeout = std::chrono::seconds(60);
  return ps::Worker::connect(o, spec);
}

// libtorch's default generator is global: workers (threads) build their models one at a time.
// Each worker draws its own weights from its own seed: worker 0's initialise the servers, and
// every worker must start from them.
::torch::nn::Sequential makeModel(int seed = 7) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(seed);
  return ::torch::nn::Sequential(::torch::nn::Linear(20, 16), ::torch::nn::ReLU(), ::torch::nn::Linear(16, 8),
                                 ::torch::nn::ReLU(), ::torch::nn::Linear(8, 4));
}

// The model's parameters and one that no forward pass uses (its gradient stays undefined).
std::vector<::torch::Tensor> trainable(::torch::nn::Sequential& model, ::torch::Tensor& unused) {
  std::vector<::torch::Tensor> params = model->parameters();
  unused = ::torch::arange(3, ::torch::kFloat32).requires_grad_();
  params.push_back(unused);
  return params;
}

struct Data {
  ::torch::Tensor x;
  ::torch::Tensor y;
};

Data makeData() {
  auto gen = ::at::detail::createCPUGenerator(11);
  return {::torch::randn({kSteps * kBatch, 20}, gen), ::torch::randint(0, 4, {kSteps * kBatch}, gen)};
}

// One process, whole batches, libtorch's SGD.
std::vector<::torch::Tensor> referenceParameters() {
  auto model = makeModel();
  ::torch::Tensor unused;
  auto params = trainable(model, unused);
  ::torch::optim::SGD sgd(params, ::torch::optim::SGDOptions(kLr).momentum(kMomentum));
  const Data data = makeData();
  for (int s = 0; s < kSteps; ++s) {
    sgd.zero_grad();
    auto x = data.x.narrow(0, s * kBatch, kBatch);
    auto y = data.y.narrow(0, s * kBatch, kBatch);
    ::torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    sgd.step();
  }
  std::vector<::torch::Tensor> out;
  for (auto& p : params) out.push_back(p.detach().clone());
  return out;
}

void expectClose(const std::vector<::torch::Tensor>& got, const std::vector<::torch::Tensor>& want, double tol,
                 int worker) {
  test::expectClose(got, want, tol, "worker " + std::to_string(worker));
}

ps::OptimizerOptions sgd(float momentum) {
  ps::OptimizerOptions c;
  c.momentum = momentum;
  return c;
}

class PSOptimizerBspTest : public ::testing::TestWithParam<bool> {};

// Two workers, each its own half of every batch, two servers (so tensors are split across
// them): the servers average the halves' gradients, which is the whole batch's mean gradient.
TEST_P(PSOptimizerBspTest, EqualsOneProcessSgdOnTheWholeBatch) {
  const bool hooks = GetParam();
  constexpr int kWorkers = 2;
  const auto want = referenceParameters();
  {
    auto initial = makeModel();
    EXPECT_GT((initial->parameters()[0] - want[0]).abs().max().item<double>(), 1e-3) << "the reference trains";
  }
  Servers servers(2);
  runThreads(kWorkers, [&](int id) {
    ::torch::set_num_threads(1);
    auto model = makeModel(7 + id);  // worker 1's own weights are overwritten by worker 0's
    ::torch::Tensor unused;
    auto params = trainable(model, unused);
    auto spec = PSOptimizer::tableFor(params, ps::Mode::parse("bsp"), sgd(kMomentum));
    PSOptimizerOptions o;
    o.pushFromHooks = hooks;
    PSOptimizer opt(params, connect(servers, id, kWorkers, spec), kLr, o);
    const Data data = makeData();
    const int share = kBatch / kWorkers;
    for (int s = 0; s < kSteps; ++s) {
      opt.zeroGrad();
      const int begin = s * kBatch + id * share;
      ::torch::nn::functional::cross_entropy(model->forward(data.x.narrow(0, begin, share)),
                                             data.y.narrow(0, begin, share))
          .backward();
      opt.step();
      EXPECT_EQ(opt.worker().steps(), s + 1);
    }
    std::vector<::torch::Tensor> got;
    for (auto& p : params) got.push_back(p.detach().clone());
    expectClose(got, want, 1e-5, id);
    const torch::StepTiming timing = opt.totals();
    EXPECT_EQ(timing.steps, kSteps);
    EXPECT_GT(timing.bytes, 0u);
    EXPECT_GE(timing.step, timing.wait);
    const ps::WorkerStats stats = opt.worker().stats();
    EXPECT_EQ(std::accumulate(stats.staleness.begin() + 1, stats.staleness.end(), std::uint64_t{0}), 0u)
        << "bsp updates are never stale";
  });
}

INSTANTIATE_TEST_SUITE_P(PushFromHooksOrStep, PSOptimizerBspTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Hooks" : "Step"; });

// A task a linear model can learn: the label is the argmax of a fixed linear map of the input.
struct Task {
  ::torch::Tensor x;
  ::torch::Tensor y;
};

Task makeTask() {
  auto gen = ::at::detail::createCPUGenerator(5);
  auto x = ::torch::randn({512, 20}, gen);
  auto w = ::torch::randn({20, 4}, gen);
  return {x, x.matmul(w).argmax(1)};
}

double lossOn(::torch::nn::Sequential& model, const Task& task) {
  ::torch::NoGradGuard noGrad;
  return ::torch::nn::functional::cross_entropy(model->forward(task.x), task.y).item<double>();
}

class PSOptimizerAsyncTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PSOptimizerAsyncTest, TrainsAModel) {
  constexpr int kWorkers = 2;
  constexpr int kTrainSteps = 60;
  constexpr int kPerWorker = 16;
  const Task task = makeTask();
  Servers servers(2);
  std::vector<double> before(kWorkers), after(kWorkers);
  runThreads(kWorkers, [&](int id) {
    ::torch::set_num_threads(1);
    auto model = makeModel(3);
    auto params = model->parameters();
    auto spec = PSOptimizer::tableFor(params, ps::Mode::parse(GetParam()), sgd(0.5f));
    PSOptimizer opt(params, connect(servers, id, kWorkers, spec), 0.2);
    before[id] = lossOn(model, task);
    const std::int64_t half = task.x.size(0) / kWorkers;
    for (int s = 0; s < kTrainSteps; ++s) {
      const std::int64_t begin = id * half + (s * kPerWorker) % half;
      opt.zeroGrad();
      ::torch::nn::functional::cross_entropy(model->forward(task.x.narrow(0, begin, kPerWorker)),
                                             task.y.narrow(0, begin, kPerWorker))
          .backward();
      opt.step();
    }
    after[id] = lossOn(model, task);
    const ps::WorkerStats stats = opt.worker().stats();
    EXPECT_GT(stats.pushes, 0u);
    EXPECT_GT(std::accumulate(stats.staleness.begin(), stats.staleness.end(), std::uint64_t{0}), 0u);
  });
  for (int id = 0; id < kWorkers; ++id) {
    EXPECT_LT(after[id], 0.6 * before[id]) << "worker " << id << ": loss " << before[id] << " -> " << after[id];
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PSOptimizerAsyncTest, ::testing::Values("asp", "ssp:1"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "asp" ? "Asp" : "Ssp1";
                         });

TEST(PSOptimizerTest, RefusesParametersTheServersCannotHold) {
  const auto mode = ps::Mode::parse("asp");
  auto check = [&](std::vector<::torch::Tensor> params, const std::string& message) {
    try {
      PSOptimizer::tableFor(params, mode, {});
      ADD_FAILURE() << "accepted: " << message;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  check({::torch::zeros({3}, ::torch::kFloat64)}, "float32 only");
  check({::torch::zeros({4, 4}).t()}, "not contiguous");
  check({::torch::Tensor()}, "undefined");
  check({}, "no parameters");
  const auto spec = PSOptimizer::tableFor({::torch::zeros({4, 4}), ::torch::zeros({4})}, mode, {});
  EXPECT_EQ(spec.sizes, (std::vector<std::size_t>{16, 4}));
  EXPECT_EQ(spec.mode, mode);
}

TEST(PSOptimizerTest, RefusesATableThatDoesNotFitTheParameters) {
  Servers servers(1);
  auto model = makeModel();
  auto params = model->parameters();
  auto other = PSOptimizer::tableFor({::torch::zeros({5})}, ps::Mode::parse("asp"), {});
  EXPECT_THROW(PSOptimizer(params, connect(servers, 0, 1, other), 0.1), InvalidArgument);
}

}  // namespace
}  // namespace gyre
