// flat_state.h: optimizer state kept in flat shards of parameters goes back to whole parameters
// and is cut again for another layout without changing a step; the layouts' text round-trips.
#include "gyre/torch/flat_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "torch/tensor_checks.h"

namespace gyre::torch {
namespace {

std::vector<::torch::Tensor> someParameters() {
  ::torch::manual_seed(3);
  return {::torch::randn({3, 4}).requires_grad_(), ::torch::randn({5}).requires_grad_(),
          ::torch::randn({2, 3}).requires_grad_()};
}

std::vector<::torch::Tensor> someGradients(int step) {
  ::torch::manual_seed(100 + step);
  return {::torch::randn({3, 4}), ::torch::randn({5}), ::torch::randn({2, 3})};
}

// The parameters laid end to end (23 elements), cut into `ranks` chunks as ZeRO-3 cuts a unit
// (padded to ranks · chunk): rank r's flat.
FlatLayout chunkOf(const std::vector<::torch::Tensor>& params, int ranks, int r) {
  std::vector<std::int64_t> numels, offsets;
  std::vector<std::size_t> indices;
  std::int64_t used = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    numels.push_back(params[k].numel());
    offsets.push_back(used);
    indices.push_back(k);
    used += params[k].numel();
  }
  const std::int64_t chunk = (used + ranks - 1) / ranks;
  return {piecesOfRange(numels, offsets, indices, r * chunk, (r + 1) * chunk)};
}

std::vector<::torch::Tensor> flatsOf(const FlatLayout& layout) {
  std::vector<::torch::Tensor> out;
  for (const FlatTensor& f : layout) out.push_back(::torch::zeros({f.numel}).requires_grad_());
  return out;
}

std::vector<::torch::Tensor> copies(const std::vector<::torch::Tensor>& ts) {
  std::vector<::torch::Tensor> out;
  for (const ::torch::Tensor& t : ts) out.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
  return out;
}

TEST(FlatState, PiecesCoverTheRangeOfParametersLaidEndToEnd) {
  // Parameters of 12, 5 and 6 elements from 0, 12 and 17; elements [10, 20).
  const FlatTensor f = piecesOfRange({12, 5, 6}, {0, 12, 17}, {4, 7, 9}, 10, 20);
  EXPECT_EQ(f.numel, 10);
  const std::vector<FlatPiece> want = {{4, 10, 0, 2}, {7, 0, 2, 5}, {9, 0, 7, 3}};
  EXPECT_EQ(f.pieces, want);
  // Beyond the parameters (the padding of the last chunk): no piece.
  EXPECT_TRUE(piecesOfRange({12}, {0}, {0}, 12, 16).pieces.empty());
}

TEST(FlatState, LayoutsRoundTripAsTextAndBadTextIsNamed) {
  const FlatLayout layout = {piecesOfRange({12, 5, 6}, {0, 12, 17}, {0, 1, 2}, 10, 20), {4, {}},
                             piecesOfRange({12}, {0}, {3}, 0, 12)};
  EXPECT_EQ(parseFlatLayout(flatLayoutText(layout)), layout);
  EXPECT_TRUE(parseFlatLayout("").empty());
  for (const std::string bad : {"10", "x:1,2,3,4", "10:1,2,3", "10:1,2,3,4,5", "10:1;2"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parseFlatLayout(bad), InvalidArgument);
  }
}

// Adam on whole parameters for two steps; its state cut into 2 ranks' flats, each stepped
// twice more on its cut of the gradients, then put back together on 3 ranks' flats and stepped
// once more: the same values and state as the whole optimizer's five steps (up to rounding: the
// vectorised loops may fuse differently over other lengths).
TEST(FlatState, StateCutIntoShardsAndBackStepsAsTheWholeOptimizer) {
  for (const bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad);
    const std::vector<::torch::Tensor> reference = someParameters();
    ::torch::optim::Adam whole(reference, ::torch::optim::AdamOptions(0.01).amsgrad(amsgrad));
    auto stepWhole = [&](int step) {
      const std::vector<::torch::Tensor> g = someGradients(step);
      for (std::size_t k = 0; k < reference.size(); ++k) reference[k].mutable_grad() = g[k];
      whole.step();
    };
    stepWhole(0);
    stepWhole(1);

    // The same two steps, then the state into 2 ranks' flats.
    const std::vector<::torch::Tensor> params = copies(reference);
    std::vector<ParamStatePtr> states(params.size());
    for (std::size_t k = 0; k < params.size(); ++k)
      states[k] = whole.state().at(c10::guts::to_string(reference[k].unsafeGetTensorImpl()))->clone();
    auto stepShards = [&](int ranks, std::vector<int> steps) {
      std::vector<ParamStatePtr> gathered(params.size());
      for (int r = 0; r < ranks; ++r) {
        const FlatLayout layout = chunkOf(params, ranks, r);
        const std::vector<::torch::Tensor> flats = flatsOf(layout);
        ::torch::optim::Adam shard(flats, ::torch::optim::AdamOptions(0.01).amsgrad(amsgrad));
        setFlatValues(flats, layout, params);
        setFlatStates(shard, layout, params, states);
        for (int step : steps) {
          // This rank's cut of the gradients, as a reduce-scatter leaves it.
          const std::vector<::torch::Tensor> g = someGradients(step);
          const std::vector<::torch::Tensor> grads = flatsOf(layout);
          setFlatValues(grads, layout, g);
          flats[0].mutable_grad() = grads[0].detach();
          shard.step();
        }
        gatherFlatStates(shard, layout, params, gathered);
        gatherFlatValues(flats, layout, params);  // each rank its part: distinct elements
      }
      states = std::move(gathered);
    };
    stepShards(2, {2, 3});
    stepWhole(2);
    stepWhole(3);
    stepShards(3, {4});
    stepWhole(4);

    test::expectClose(params, reference, 1e-6, "values after five steps");
    for (std::size_t k = 0; k < params.size(); ++k) {
      SCOPED_TRACE(k);
      ASSERT_NE(states[k], nullptr);
      const auto& got = static_cast<const ::torch::optim::AdamParamState&>(*states[k]);
      const auto& want = static_cast<const ::torch::optim::AdamParamState&>(
          *whole.state().at(c10::guts::to_string(reference[k].unsafeGetTensorImpl())));
      EXPECT_EQ(got.step(), want.step());
      EXPECT_TRUE(got.exp_avg().allclose(want.exp_avg(), 1e-6, 1e-7));
      EXPECT_TRUE(got.exp_avg_sq().allclose(want.exp_avg_sq(), 1e-6, 1e-9));
      EXPECT_EQ(got.max_exp_avg_sq().defined(), want.max_exp_avg_sq().defined());
      if (amsgrad) {
        EXPECT_TRUE(got.max_exp_avg_sq().allclose(want.max_exp_avg_sq(), 1e-6, 1e-9));
      }
    }
  }
}

TEST(FlatState, ALayoutThatDoesNotFitIsRefused) {
  const std::vector<::torch::Tensor> params = someParameters();
  FlatLayout layout = chunkOf(params, 1, 0);
  layout[0].pieces[0].length = 100;  // beyond its parameter
  const std::vector<::torch::Tensor> flats = flatsOf(layout);
  EXPECT_THROW(setFlatValues(flats, layout, params), InvalidArgument);
  EXPECT_THROW(setFlatValues(flatsOf(chunkOf(params, 1, 0)), {}, params), InvalidArgument);
  // An optimizer whose state is not elementwise-known: refused by name.
  std::vector<ParamStatePtr> states(params.size());
  states[0] = std::make_unique<::torch::optim::LBFGSParamState>();
  ::torch::optim::SGD sgd(flatsOf(chunkOf(params, 1, 0)), ::torch::optim::SGDOptions(0.1));
  EXPECT_THROW(setFlatStates(sgd, chunkOf(params, 1, 0), params, states), InvalidArgument);
}

}  // namespace
}  // namespace gyre::torch
