// Parameters without memory (gyre/torch/deferred.h): released, a layer keeps its shapes and
// references but no memory; materialised, it has memory again to receive values.
#include "gyre/torch/deferred.h"

#include <gtest/gtest.h>

namespace gyre::torch {
namespace {

TEST(Deferred, AReleasedLayerKeepsItsShapesAndTakesValuesAgain) {
  ::torch::nn::Sequential model(::torch::nn::Linear(8, 4), ::torch::nn::BatchNorm1d(4));
  const ::torch::Tensor weight = model->parameters()[0];
  const ::torch::Tensor mean = model->buffers()[0];
  releaseParameters(*model);
  EXPECT_FALSE(isMaterialised(weight));
  EXPECT_FALSE(isMaterialised(mean));
  EXPECT_EQ(weight.sizes(), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(weight.storage().nbytes(), 0u);

  materialiseParameters(*model);
  EXPECT_TRUE(isMaterialised(weight));
  EXPECT_TRUE(isMaterialised(mean));
  ::torch::NoGradGuard noGrad;
  weight.fill_(0.5);
  EXPECT_EQ(model->parameters()[0].sum().item<float>(), 16.0f);  // the same tensor, the module's
  // Materialised again: nothing changes for a tensor that holds memory.
  materialiseParameters(*model);
  EXPECT_EQ(weight.sum().item<float>(), 16.0f);
}

TEST(Deferred, ATensorOfNoElementsIsAlwaysMaterialised) {
  ::torch::Tensor empty = ::torch::zeros({0, 3});
  EXPECT_TRUE(isMaterialised(empty));
}

}  // namespace
}  // namespace gyre::torch
