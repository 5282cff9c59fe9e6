// The vit split over a tensor-parallel group (--tp, src/train/vit_parallel.h): each of its
// parameters is a share of one of the whole vit's, cut as the table says; shares join back into
// the whole tensor; a module of the shares' shapes, built without a group, has the twin's names in
// its order (what a --tp checkpoint's part loads into); and the twin gathers back into its whole.
#include "train/vit_parallel.h"

#include <gtest/gtest.h>

#include <mutex>
#include <torch/torch.h>

#include "gyre/errors.h"
#include "gyre/torch/deferred.h"
#include "gyre/store.h"
#include "support/ranks.h"
#include "train/vit.h"

namespace gyre::train {
namespace {

const VitOptions kShape{.depth = 2, .width = 16, .heads = 4, .patch = 7};

TEST(VitParallel, SharesJoinBackIntoTheWholeTensor) {
  ::torch::manual_seed(3);
  const ::torch::Tensor matrix = ::torch::randn({12, 8});
  for (const TensorCut cut : {TensorCut::kWhole, TensorCut::kRows, TensorCut::kColumns, TensorCut::kInProjection}) {
    std::vector<::torch::Tensor> shares;
    for (int r = 0; r < 2; ++r) shares.push_back(cutShare(matrix, cut, 2, r));
    EXPECT_TRUE(::torch::equal(joinShares(shares, cut), matrix)) << static_cast<int>(cut);
  }
  // The input projection's rows are [queries; keys; values]: rank 1 of 2 holds the second half of each.
  const ::torch::Tensor rows = ::torch::arange(12).to(::torch::kFloat);
  EXPECT_TRUE(::torch::equal(cutShare(rows, TensorCut::kInProjection, 2, 1),
                             ::torch::tensor({2.f, 3.f, 6.f, 7.f, 10.f, 11.f})));
  EXPECT_TRUE(::torch::equal(cutShare(matrix, TensorCut::kColumns, 2, 1), matrix.narrow(1, 4, 4)));
  EXPECT_THROW(cutShare(::torch::zeros({3, 3}), TensorCut::kRows, 2, 0), Error);
}

TEST(VitParallel, TheTwinIsTheWholeVitsSharesAndGathersBackIntoIt) {
  auto store = createMemoryStore();
  // The ranks are threads of one process: one generator, drawn by one rank at a time.
  std::mutex drawing;
  auto draw = [&drawing] {
    std::lock_guard<std::mutex> lock(drawing);
    ::torch::manual_seed(5);
    return makeVit(kShape);
  };
  test::runThreads(2, [&](int rank) {
    ::torch::nn::Sequential whole = draw();
    const std::shared_ptr<Communicator> comm = test::makeComm(store, rank, 2);
    ::torch::nn::Sequential twin = makeTensorParallelVit(whole, kShape, comm);
    const std::vector<TensorShare> shares = tensorParallelVitShares(whole);
    const auto params = twin->named_parameters();
    const std::vector<::torch::Tensor> wholeParams = whole->parameters();
    ASSERT_EQ(params.size(), shares.size());
    const auto shapes = tensorParallelVitShapes(whole, 2, rank)->named_parameters();
    ASSERT_EQ(shapes.size(), shares.size());
    for (std::size_t k = 0; k < shares.size(); ++k) {
      EXPECT_EQ(params[k].key(), shares[k].name);
      EXPECT_EQ(shapes[k].key(), shares[k].name);
      EXPECT_EQ(shapes[k].value().sizes(), params[k].value().sizes()) << shares[k].name;
      EXPECT_TRUE(::torch::equal(params[k].value(), cutShare(wholeParams[shares[k].whole], shares[k].cut, 2, rank)))
          << shares[k].name;
    }
    auto cutOf = [&shares](const std::string& name) {
      for (const TensorShare& s : shares)
        if (s.name == name) return static_cast<int>(s.cut);
      return -1;
    };
    EXPECT_EQ(cutOf("embedding.positions"), static_cast<int>(TensorCut::kWhole));
    EXPECT_EQ(cutOf("block1.attention.in_proj_weight"), static_cast<int>(TensorCut::kInProjection));
    EXPECT_EQ(cutOf("block0.mlp.fc1.weight"), static_cast<int>(TensorCut::kRows));
    EXPECT_EQ(cutOf("block0.mlp.fc2.weight"), static_cast<int>(TensorCut::kColumns));
    EXPECT_EQ(cutOf("block0.mlp.fc2.bias"), static_cast<int>(TensorCut::kWhole));

    // Every share moved, then gathered: the whole vit holds the twin's values.
    {
      ::torch::NoGradGuard noGrad;
      for (const ::torch::Tensor& p : twin->parameters()) p.add_(1.0f);
    }
    gatherTensorParallelVit(twin, whole, *comm);
    const std::vector<::torch::Tensor> start = draw()->parameters();
    for (std::size_t k = 0; k < start.size(); ++k)
      EXPECT_TRUE(::torch::allclose(wholeParams[k], start[k] + 1.0f)) << k;

    // Onto rank 1 alone, into a whole model without memory: it gets memory and the values there,
    // rank 1's own shares give theirs back, and rank 0 keeps its shares and leaves its model be.
    {
      ::torch::NoGradGuard noGrad;
      for (const ::torch::Tensor& p : twin->parameters()) p.add_(1.0f);
    }
    ::torch::nn::Sequential empty = draw();
    gyre::torch::releaseParameters(*empty);
    gatherTensorParallelVit(twin, empty, *comm, 1);
    const std::vector<::torch::Tensor> gathered = empty->parameters();
    for (std::size_t k = 0; k < start.size(); ++k) {
      EXPECT_EQ(gyre::torch::isMaterialised(gathered[k]), rank == 1) << k;
      if (rank == 1) {
        EXPECT_TRUE(::torch::allclose(gathered[k], start[k] + 2.0f)) << k;
      }
    }
    for (const ::torch::Tensor& p : twin->parameters()) EXPECT_EQ(gyre::torch::isMaterialised(p), rank == 0);
  });
}

}  // namespace
}  // namespace gyre::train
