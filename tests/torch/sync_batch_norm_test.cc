// SyncBatchNorm: W ranks (threads), each with a slice of a batch (of unequal sizes too), compute
// what one process's BatchNorm computes on the whole batch: outputs, input gradients, summed
// weight and bias gradients, running statistics; and trained under DistributedOptimizer, the
// same parameters after a few steps.
#include "gyre/torch/sync_batch_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <numeric>

#include "gyre/gyre.h"
#include "gyre/torch/distributed_optimizer.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre::torch {
namespace {

namespace nn = ::torch::nn;
using ::torch::Tensor;

using test::makeComm;

struct Batch {
  Tensor x;  // [12, 3, 4, 4]
  Tensor r;  // the loss is (y * r).sum(): every output gets its own gradient
};

Batch makeBatch() {
  auto gen = ::at::detail::createCPUGenerator(5);
  return {::torch::randn({12, 3, 4, 4}, gen) * 2 + 1, ::torch::randn({12, 3, 4, 4}, gen)};
}

TEST(SyncBatchNorm, AloneIsLibtorchsBatchNormInTrainingAndEval) {
  const Batch b = makeBatch();
  SyncBatchNorm sync(3);
  nn::BatchNorm2d plain(3);
  for (int step = 0; step < 2; ++step) {
    const Tensor x1 = b.x.clone().requires_grad_(), x2 = b.x.clone().requires_grad_();
    const Tensor y1 = sync(x1), y2 = plain(x2);
    EXPECT_LT(test::maxDiff(y1, y2), 1e-5);
    (y1 * b.r).sum().backward();
    (y2 * b.r).sum().backward();
    EXPECT_LT(test::maxDiff(x1.grad(), x2.grad()), 1e-5);
    EXPECT_LT(test::maxDiff(sync->weight.grad(), plain->weight.grad()), 1e-4);
    EXPECT_LT(test::maxDiff(sync->bias.grad(), plain->bias.grad()), 1e-4);
  }
  EXPECT_LT(test::maxDiff(sync->running_mean, plain->running_mean), 1e-6);
  EXPECT_LT(test::maxDiff(sync->running_var, plain->running_var), 1e-6);
  EXPECT_EQ(sync->num_batches_tracked.item<std::int64_t>(), 2);
  sync->eval();
  plain->eval();
  EXPECT_LT(test::maxDiff(sync(b.x), plain(b.x)), 1e-5);
  EXPECT_THROW(sync(::torch::zeros({4, 2, 3})), InvalidArgument);  // 2 channels, not 3
  sync->train();
  EXPECT_THROW(sync(::torch::zeros({1, 3})), InvalidArgument);  // one value per channel
  EXPECT_THROW(SyncBatchNorm(SyncBatchNormOptions(3).momentum(2)), InvalidArgument);
}

// Ranks hold slices of the batch of the given sizes.
void expectSlicesMatchTheWholeBatch(const std::vector<std::int64_t>& sizes) {
  const int world = static_cast<int>(sizes.size());
  const Batch b = makeBatch();
  nn::BatchNorm2d plain(3);
  const Tensor x = b.x.clone().requires_grad_();
  const Tensor y = plain(x);
  (y * b.r).sum().backward();
  auto store = createMemoryStore();
  test::runThreads(world, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, world);
    SyncBatchNorm sync(3);
    EXPECT_EQ(setSyncBatchNormCommunicator(*sync, comm), 1);
    const std::int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + rank, std::int64_t{0});
    const std::int64_t n = sizes[static_cast<std::size_t>(rank)];
    const Tensor mine = b.x.narrow(0, begin, n).clone().requires_grad_();
    const Tensor out = sync(mine);
    (out * b.r.narrow(0, begin, n)).sum().backward();
    const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(world);
    EXPECT_LT(test::maxDiff(out, y.narrow(0, begin, n)), 1e-5) << who;
    EXPECT_LT(test::maxDiff(mine.grad(), x.grad().narrow(0, begin, n)), 1e-5) << who;
    // The parameters' gradients are this rank's part: summed over the ranks, the whole batch's.
    Tensor grads = ::torch::cat({sync->weight.grad(), sync->bias.grad()}).contiguous();
    comm->allreduce(grads.data_ptr<float>(), grads.data_ptr<float>(), grads.numel(), {DataType::kFloat32});
    EXPECT_LT(test::maxDiff(grads, ::torch::cat({plain->weight.grad(), plain->bias.grad()})), 1e-4) << who;
    EXPECT_LT(test::maxDiff(sync->running_mean, plain->running_mean), 1e-6) << who;
    EXPECT_LT(test::maxDiff(sync->running_var, plain->running_var), 1e-6) << who;
  });
}

TEST(SyncBatchNorm, RanksWithSlicesOfABatchComputeWhatOneProcessDoesOnTheWhole) {
  expectSlicesMatchTheWholeBatch({6, 6});
  expectSlicesMatchTheWholeBatch({3, 3, 3, 3});
  expectSlicesMatchTheWholeBatch({5, 7});  // unequal slices
  expectSlicesMatchTheWholeBatch({1, 2, 4, 5});
}

// libtorch's default generator is global: models are built one at a time from the same seed.
template <typename Norm>
nn::Sequential convModel() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(3);
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)), Norm(4), nn::ReLU(), nn::Flatten(),
                        nn::Linear(4 * 4 * 4, 5));
}

std::vector<Tensor> trained(nn::Sequential& model, Communicator* comm, std::shared_ptr<Communicator> owned) {
  auto sgd = std::make_shared<::torch::optim::SGD>(model->parameters(),
                                                   ::torch::optim::SGDOptions(0.1).momentum(0.9));
  std::unique_ptr<DistributedOptimizer> dist;
  if (comm != nullptr) {
    DistributedOptimizerOptions o;
    o.bucketCapBytes = 256;  // several buckets in flight around the batch norm's reductions
    o.firstBucketCapBytes = 128;
    dist = std::make_unique<DistributedOptimizer>(std::move(owned), sgd, o);
  }
  auto gen = ::at::detail::createCPUGenerator(9);
  const Tensor x = ::torch::randn({4 * 8, 3, 4, 4}, gen);
  const Tensor labels = ::torch::randint(0, 5, {4 * 8}, gen);
  const int world = comm != nullptr ? comm->size() : 1;
  const int share = 8 / world;
  for (int step = 0; step < 4; ++step) {
    const int begin = step * 8 + (comm != nullptr ? comm->rank() * share : 0);
    const Tensor loss = nn::functional::cross_entropy(model->forward(x.narrow(0, begin, share)),
                                                      labels.narrow(0, begin, share));
    if (dist) {
      dist->zeroGrad();
      loss.backward();
      dist->step();
    } else {
      sgd->zero_grad();
      loss.backward();
      sgd->step();
    }
  }
  std::vector<Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  for (const auto& b : model->buffers()) out.push_back(b.detach().clone().to(::torch::kFloat32));
  return out;
}

TEST(SyncBatchNorm, TrainsUnderDistributedOptimizerAsOneProcessOnTheGlobalBatch) {
  auto reference = convModel<nn::BatchNorm2d>();
  const auto want = trained(reference, nullptr, nullptr);
  for (const int world : {2, 4}) {
    auto store = createMemoryStore();
    test::runThreads(world, [&](int rank) {
      ::torch::set_num_threads(1);
      auto comm = makeComm(store, rank, world);
      auto model = convModel<SyncBatchNorm>();
      EXPECT_EQ(setSyncBatchNormCommunicator(*model, comm), 1);
      test::expectClose(trained(model, comm.get(), comm), want, 1e-5,
                        "rank " + std::to_string(rank) + " of " + std::to_string(world));
    });
  }
}

}  // namespace
}  // namespace gyre::torch
