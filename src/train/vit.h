// A small Vision Transformer for 28×28 images (Dosovitskiy et al., "An Image is Worth 16x16
// Words"): the image cut into patches, each patch a token (a linear projection, as a convolution
// with stride = kernel = patch), a learned class token and position embeddings, pre-norm
// transformer blocks (layer norm, multi-head self-attention, residual; layer norm, a GeLU MLP of
// 4 × width, residual), and a linear head on the class token's final layer norm.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "gyre/torch/module.h"

namespace gyre::train {

struct VitOptions {
  std::int64_t depth = 4;  // transformer blocks
  std::int64_t width = 64;
  std::int64_t heads = 4;  // divides width
  std::int64_t patch = 7;  // divides 28
  std::int64_t classes = 10;
};

// [N, 1, 28, 28] images → [N, 1 + (28 / patch)², width] tokens (the class token first).
class PatchEmbeddingImpl : public ::torch::nn::Cloneable<PatchEmbeddingImpl> {
 public:
  explicit PatchEmbeddingImpl(VitOptions options);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& images);

  VitOptions options;
  ::torch::nn::Conv2d projection{nullptr};
  ::torch::Tensor classToken, positions;
};

// One pre-norm block: x + attention(norm(x)), then x + mlp(norm(x)); [N, tokens, width] both ways.
class TransformerBlockImpl : public ::torch::nn::Cloneable<TransformerBlockImpl> {
 public:
  explicit TransformerBlockImpl(VitOptions options);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& tokens);

  VitOptions options;
  ::torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  ::torch::nn::MultiheadAttention attention{nullptr};
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// The final layer norm and the linear head on the class token: [N, tokens, width] → [N, classes].
class ClassHeadImpl : public ::torch::nn::Cloneable<ClassHeadImpl> {
 public:
  explicit ClassHeadImpl(VitOptions options);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& tokens);

  VitOptions options;
  ::torch::nn::LayerNorm norm{nullptr};
  ::torch::nn::Linear head{nullptr};
};

// Called on each child of a model as it is made (its place in the Sequential, the child as the
// Sequential holds it: made.ptr() is the module, made.forward() runs it).
using ChildMade = std::function<void(std::size_t child, ::torch::nn::AnyModule& made)>;

GYRE_TORCH_MODULE(PatchEmbedding);
GYRE_TORCH_MODULE(TransformerBlock);
GYRE_TORCH_MODULE(ClassHead);

// The whole model as a Sequential: PatchEmbedding, `depth` TransformerBlocks, ClassHead (each
// stage a module of its own, so a pipeline can cut between blocks). Throws InvalidArgument for a
// shape that does not fit (heads not dividing the width, a patch not dividing 28). `made`, when
// given, sees each child as soon as it is made (makeModel's).
::torch::nn::Sequential makeVit(const VitOptions& options, const ChildMade& made = {});

}  // namespace gyre::train
