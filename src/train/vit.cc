#include "train/vit.h"

#include "gyre/errors.h"

namespace gyre::train {

namespace nn = ::torch::nn;
using ::torch::Tensor;

PatchEmbeddingImpl::PatchEmbeddingImpl(VitOptions options_) : options(options_) {
  reset();
}

void PatchEmbeddingImpl::reset() {
  const std::int64_t side = 28 / options.patch;
  projection = register_module(
      "projection", nn::Conv2d(nn::Conv2dOptions(1, options.width, options.patch).stride(options.patch)));
  // Small random starts, as ViT's truncated-normal(0.02) initialisation.
  classToken = register_parameter("class_token", ::torch::randn({1, 1, options.width}) * 0.02);
  positions = register_parameter("positions", ::torch::randn({1, 1 + side * side, options.width}) * 0.02);
}

Tensor PatchEmbeddingImpl::forward(const Tensor& images) {
  const Tensor patches = projection(images).flatten(2).transpose(1, 2);  // [N, patches, width]
  return ::torch::cat({classToken.expand({images.size(0), 1, options.width}), patches}, 1) + positions;
}

TransformerBlockImpl::TransformerBlockImpl(VitOptions options_) : options(options_) {
  reset();
}

void TransformerBlockImpl::reset() {
  const std::int64_t w = options.width;
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({w})));
  attention = register_module("attention", nn::MultiheadAttention(w, options.heads));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({w})));
  fc1 = register_module("fc1", nn::Linear(w, 4 * w));
  fc2 = register_module("fc2", nn::Linear(4 * w, w));
}

Tensor TransformerBlockImpl::forward(const Tensor& tokens) {
  // libtorch's attention takes [tokens, N, width].
  const Tensor x = norm1(tokens).transpose(0, 1);
  const Tensor attended = std::get<0>(attention->forward(x, x, x, {}, /*need_weights=*/false)).transpose(0, 1);
  const Tensor h = tokens + attended;
  return h + fc2(::torch::gelu(fc1(norm2(h))));
}

ClassHeadImpl::ClassHeadImpl(VitOptions options_) : options(options_) {
  reset();
}

void ClassHeadImpl::reset() {
  norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({options.width})));
  head = register_module("head", nn::Linear(options.width, options.classes));
}

Tensor ClassHeadImpl::forward(const Tensor& tokens) {
  return head(norm(tokens.select(1, 0)));
}

nn::Sequential makeVit(const VitOptions& o, const ChildMade& made) {
  if (o.depth < 1 || o.width < 1 || o.heads < 1 || o.width % o.heads != 0)
    throw InvalidArgument("vit: " + std::to_string(o.heads) + " heads do not divide the width " +
                          std::to_string(o.width) + " (depth " + std::to_string(o.depth) + ")");
  if (o.patch < 1 || 28 % o.patch != 0)
    throw InvalidArgument("vit: a patch of " + std::to_string(o.patch) +
                          " pixels does not divide the 28-pixel images");
  nn::Sequential model;
  auto add = [&](const std::string& name, auto child) {
    model->push_back(name, child.ptr());
    if (made) made(model->size() - 1, *(model->end() - 1));
  };
  add("embedding", PatchEmbedding(o));
  for (std::int64_t i = 0; i < o.depth; ++i) add("block" + std::to_string(i), TransformerBlock(o));
  add("head", ClassHead(o));
  return model;
}

}  // namespace gyre::train
