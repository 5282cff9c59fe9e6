// The vit of `gyre train --model vit`: its shapes, that it learns, and the shapes it refuses.
#include "train/vit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "gyre/errors.h"
#include "train/models.h"

namespace gyre::train {
namespace {

TEST(Vit, ImagesBecomeTokensAndLogits) {
  ::torch::manual_seed(0);
  const VitOptions o{.depth = 2, .width = 32, .heads = 4, .patch = 7};
  auto model = makeModel("vit", false, o);
  ASSERT_EQ(model->size(), 4u);  // embedding, 2 blocks, head: a pipeline can cut between them
  const auto images = ::torch::randn({3, 1, 28, 28});
  const auto tokens = model[0]->as<PatchEmbedding>()->forward(images);
  EXPECT_EQ(tokens.sizes().vec(), (std::vector<std::int64_t>{3, 17, 32}));  // class token + 16 patches
  EXPECT_EQ(model->forward(images).sizes().vec(), (std::vector<std::int64_t>{3, 10}));
  // Each sample's logits depend on its own image only.
  const auto one = model->forward(images.narrow(0, 1, 1));
  EXPECT_TRUE(::torch::allclose(one, model->forward(images).narrow(0, 1, 1), 1e-5, 1e-5));
}

TEST(Vit, FitsASmallBatch) {
  ::torch::manual_seed(1);
  auto model = makeVit({.depth = 1, .width = 16, .heads = 2, .patch = 14});
  const auto images = ::torch::randn({8, 1, 28, 28});
  const auto labels = ::torch::arange(8) % 10;
  ::torch::optim::Adam adam(model->parameters(), 0.01);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    adam.zero_grad();
    const auto loss = ::torch::nn::functional::cross_entropy(model->forward(images), labels);
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first / 10) << "the vit did not fit 8 samples: loss " << first << " -> " << last;
  for (const auto& p : model->parameters())
    EXPECT_TRUE(p.grad().defined()) << "a parameter without a gradient";
}

TEST(Vit, ShapesThatDoNotFitAreRefused) {
  EXPECT_THROW(makeVit({.width = 30, .heads = 4}), InvalidArgument);
  EXPECT_THROW(makeVit({.patch = 5}), InvalidArgument);
  EXPECT_THROW(makeModel("vat"), InvalidArgument);
}

}  // namespace
}  // namespace gyre::train
