// Tensor parallelism: T ranks (threads) of a tensor-parallel group compute what the unsharded
// layer computes: the same outputs, the same input gradients, and weight gradients that are the
// slices of the unsharded layer's, for T = 2 and 4; column- and row-parallel Linear, the MLP
// block, and attention against torch::nn::MultiheadAttention.
#include "gyre/torch/tensor_parallel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "gyre/gyre.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"

namespace gyre::torch {
namespace {

namespace nn = ::torch::nn;
using ::torch::Tensor;

using test::makeComm;

// libtorch's generator is global: threads draw their layers one at a time, each after the seed.
std::mutex drawing;

template <typename Make>
auto seeded(Make make) {
  std::lock_guard lock(drawing);
  ::torch::manual_seed(7);
  return make();
}

Tensor input(std::vector<std::int64_t> shape) {
  auto gen = ::at::detail::createCPUGenerator(11);
  return ::torch::randn(shape, gen);
}

// A fixed weighting of the outputs, so every output gets its own gradient.
Tensor lossOf(const Tensor& y) {
  auto gen = ::at::detail::createCPUGenerator(13);
  return (y * ::torch::randn(y.sizes(), gen)).sum();
}

// The slice of `full` rank `rank` of `size` holds along `dim`.
Tensor shardOf(const Tensor& full, std::int64_t dim, int rank, int size) {
  const std::int64_t n = full.size(dim) / size;
  return full.narrow(dim, rank * n, n);
}

class TensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallel, LinearLayersMatchTheUnshardedLayer) {
  const int tp = GetParam();
  const Tensor x = input({5, 3, 8});
  // The unsharded layers (made after the same seed as the shards) and their gradients.
  nn::Linear column = seeded([] { return nn::Linear(8, 12); });
  nn::Linear row = seeded([] { return nn::Linear(12, 6); });
  const Tensor xFull = x.clone().requires_grad_();
  const Tensor hidden = column(xFull);
  const Tensor yFull = row(hidden);
  lossOf(yFull).backward();
  auto store = createMemoryStore();
  test::runThreads(tp, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, tp);
    ColumnParallelLinear c =
        seeded([&] { return ColumnParallelLinear(ColumnParallelLinearOptions(8, 12), comm); });
    RowParallelLinear r = seeded([&] { return RowParallelLinear(RowParallelLinearOptions(12, 6), comm); });
    EXPECT_EQ(c->weight.sizes().vec(), (std::vector<std::int64_t>{12 / tp, 8}));
    EXPECT_EQ(r->weight.sizes().vec(), (std::vector<std::int64_t>{6, 12 / tp}));
    EXPECT_TRUE(::torch::equal(c->weight, shardOf(column->weight, 0, rank, tp)))
        << "not the unsharded draw's rows";
    EXPECT_TRUE(::torch::equal(r->weight, shardOf(row->weight, 1, rank, tp)))
        << "not the unsharded draw's columns";
    const Tensor xMine = x.clone().requires_grad_();
    const Tensor h = c(xMine);  // this rank's columns of the hidden features
    EXPECT_LT(test::maxDiff(h, shardOf(hidden, 2, rank, tp)), 1e-6);
    const Tensor y = r(h);
    EXPECT_LT(test::maxDiff(y, yFull), 1e-5);
    lossOf(y).backward();
    EXPECT_LT(test::maxDiff(xMine.grad(), xFull.grad()), 1e-5) << "f's backward allreduce";
    EXPECT_LT(test::maxDiff(c->weight.grad(), shardOf(column->weight.grad(), 0, rank, tp)), 1e-5);
    EXPECT_LT(test::maxDiff(c->bias.grad(), shardOf(column->bias.grad(), 0, rank, tp)), 1e-5);
    EXPECT_LT(test::maxDiff(r->weight.grad(), shardOf(row->weight.grad(), 1, rank, tp)), 1e-5);
    EXPECT_LT(test::maxDiff(r->bias.grad(), row->bias.grad()), 1e-5);

    // gather_output: every rank gets all the features; input_is_parallel=false: the layer splits.
    ColumnParallelLinear gathered = seeded(
        [&] { return ColumnParallelLinear(ColumnParallelLinearOptions(8, 12).gather_output(true), comm); });
    RowParallelLinear splitting = seeded(
        [&] { return RowParallelLinear(RowParallelLinearOptions(12, 6).input_is_parallel(false), comm); });
    const Tensor xAgain = x.clone().requires_grad_();
    const Tensor y2 = splitting(gathered(xAgain));
    EXPECT_LT(test::maxDiff(y2, yFull), 1e-5);
    lossOf(y2).backward();
    EXPECT_LT(test::maxDiff(xAgain.grad(), xFull.grad()), 1e-5);
    EXPECT_LT(test::maxDiff(gathered->weight.grad(), shardOf(column->weight.grad(), 0, rank, tp)), 1e-5);
  });
}

TEST_P(TensorParallel, MlpBlockMatchesOneRank) {
  const int tp = GetParam();
  const Tensor x = input({4, 5, 16});
  ParallelMlp full = seeded([] { return ParallelMlp(ParallelMlpOptions(16), nullptr); });
  const Tensor xFull = x.clone().requires_grad_();
  const Tensor yFull = full(xFull);
  lossOf(yFull).backward();
  auto store = createMemoryStore();
  test::runThreads(tp, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, tp);
    ParallelMlp mlp = seeded([&] { return ParallelMlp(ParallelMlpOptions(16), comm); });
    const Tensor xMine = x.clone().requires_grad_();
    const Tensor y = mlp(xMine);
    EXPECT_LT(test::maxDiff(y, yFull), 1e-5);
    lossOf(y).backward();
    EXPECT_LT(test::maxDiff(xMine.grad(), xFull.grad()), 1e-5);
    EXPECT_LT(test::maxDiff(mlp->fc1->weight.grad(), shardOf(full->fc1->weight.grad(), 0, rank, tp)), 1e-5);
    EXPECT_LT(test::maxDiff(mlp->fc2->weight.grad(), shardOf(full->fc2->weight.grad(), 1, rank, tp)), 1e-5);
    EXPECT_LT(test::maxDiff(mlp->fc2->bias.grad(), full->fc2->bias.grad()), 1e-5);
  });
}

TEST_P(TensorParallel, AttentionWithItsHeadsSplitIsMultiheadAttention) {
  const int tp = GetParam();
  const std::int64_t width = 16, heads = 4;
  const Tensor x = input({3, 6, width});  // [batch, sequence, width]
  nn::MultiheadAttention reference = seeded([&] { return nn::MultiheadAttention(width, heads); });
  {  // non-zero biases, so that their slices are tested too
    ::torch::NoGradGuard noGrad;
    reference->in_proj_bias.copy_(input({3 * width}) * 0.1);
    reference->out_proj->bias.copy_(input({width}) * 0.1);
  }
  const Tensor xFull = x.clone().requires_grad_();
  const Tensor seqFirst = xFull.transpose(0, 1);  // libtorch's attention takes [sequence, batch, width]
  const Tensor yFull = std::get<0>(reference(seqFirst, seqFirst, seqFirst)).transpose(0, 1);
  lossOf(yFull).backward();
  auto store = createMemoryStore();
  test::runThreads(tp, [&](int rank) {
    ::torch::set_num_threads(1);
    auto comm = makeComm(store, rank, tp);
    ParallelAttention attention(ParallelAttentionOptions(width, heads), comm);
    attention->loadShard(reference->in_proj_weight, reference->in_proj_bias, reference->out_proj->weight,
                         reference->out_proj->bias);
    const Tensor xMine = x.clone().requires_grad_();
    const Tensor y = attention(xMine);
    EXPECT_LT(test::maxDiff(y, yFull), 1e-5);
    lossOf(y).backward();
    EXPECT_LT(test::maxDiff(xMine.grad(), xFull.grad()), 1e-5);
    const Tensor fullGrad = reference->in_proj_weight.grad();
    for (int part = 0; part < 3; ++part) {  // queries, keys, values: this rank's heads' rows
      const Tensor mine = attention->in_proj_weight.grad().narrow(0, part * width / tp, width / tp);
      EXPECT_LT(test::maxDiff(mine, shardOf(fullGrad.narrow(0, part * width, width), 0, rank, tp)), 1e-5)
          << part;
    }
    EXPECT_LT(test::maxDiff(attention->out_proj->weight.grad(),
                            shardOf(reference->out_proj->weight.grad(), 1, rank, tp)),
              1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(Groups, TensorParallel, ::testing::Values(2, 4));

TEST(TensorParallelShapes, WhatDoesNotDivideByTheGroupIsRefused) {
  auto store = createMemoryStore();
  test::runThreads(4, [&](int rank) {
    auto comm = makeComm(store, rank, 4);
    EXPECT_THROW(ColumnParallelLinear(ColumnParallelLinearOptions(8, 6), comm), InvalidArgument);
    EXPECT_THROW(RowParallelLinear(RowParallelLinearOptions(10, 4), comm), InvalidArgument);
    EXPECT_THROW(ParallelAttention(ParallelAttentionOptions(12, 6), comm),
                 InvalidArgument);  // 6 heads, 4 ranks
    EXPECT_THROW(ParallelAttention(ParallelAttentionOptions(10, 4), comm),
                 InvalidArgument);  // 4 heads, width 10
    ParallelAttention ok(ParallelAttentionOptions(16, 4), comm);
    EXPECT_THROW(ok(::torch::zeros({2, 3, 8})), InvalidArgument);
    try {
      ColumnParallelLinear(ColumnParallelLinearOptions(8, 6), comm);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("out (6) does not divide by the 4 ranks"), std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace gyre::torch
