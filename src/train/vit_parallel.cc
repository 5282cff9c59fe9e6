#include "train/vit_parallel.h"

#include "common/check.h"

namespace gyre::train {
namespace {

namespace nn = ::torch::nn;
using ::torch::Tensor;

// Every rank's `shard` stacked along a new first dimension: [T, shard's shape].
Tensor allgatherStacked(const Tensor& shard, Communicator& tp) {
  const Tensor mine = shard.detach().contiguous();
  std::vector<std::int64_t> sizes = {tp.size()};
  for (std::int64_t d : mine.sizes()) sizes.push_back(d);
  Tensor all = ::torch::empty(sizes, mine.options());
  tp.allgather(mine.data_ptr<float>(), all.data_ptr<float>(), static_cast<std::size_t>(mine.numel()));
  return all;
}

// A column-parallel weight [rows/T, in] (or bias [rows/T]): the ranks' rows in order.
Tensor gatherRows(const Tensor& shard, Communicator& tp) {
  const Tensor all = allgatherStacked(shard, tp);
  std::vector<std::int64_t> sizes = {all.size(0) * all.size(1)};
  for (std::int64_t d = 2; d < all.dim(); ++d) sizes.push_back(all.size(d));
  return all.reshape(sizes);
}

// A row-parallel weight [out, in/T]: the ranks' columns in order.
Tensor gatherColumns(const Tensor& shard, Communicator& tp) {
  return gatherRows(shard.t(), tp).t();
}

// ParallelAttention's in_proj [3 · local, ...]: each rank's queries, keys and values, back into
// MultiheadAttention's [3 · width, ...] (all queries, then all keys, then all values).
Tensor gatherInProjection(const Tensor& shard, Communicator& tp) {
  const Tensor all = allgatherStacked(shard, tp);  // [T, 3 · local, ...]
  std::vector<std::int64_t> split = {all.size(0), 3, all.size(1) / 3};
  for (std::int64_t d = 2; d < all.dim(); ++d) split.push_back(all.size(d));
  const Tensor parts = all.reshape(split).transpose(0, 1);  // [3, T, local, ...]
  std::vector<std::int64_t> sizes = {shard.size(0) * tp.size()};
  for (std::int64_t d = 1; d < shard.dim(); ++d) sizes.push_back(shard.size(d));
  return parts.reshape(sizes);
}

void copyInto(const Tensor& to, const Tensor& from) {
  ::torch::NoGradGuard noGrad;
  to.copy_(from);
}

}  // namespace

ParallelTransformerBlockImpl::ParallelTransformerBlockImpl(VitOptions options_, std::shared_ptr<Communicator> tp)
    : options(options_), tp_(std::move(tp)) {
  reset();
}

void ParallelTransformerBlockImpl::reset() {
  const std::int64_t w = options.width;
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({w})));
  attention = register_module(
      "attention", gyre::torch::ParallelAttention(gyre::torch::ParallelAttentionOptions(w, options.heads), tp_));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({w})));
  mlp = register_module("mlp", gyre::torch::ParallelMlp(gyre::torch::ParallelMlpOptions(w), tp_));
}

Tensor ParallelTransformerBlockImpl::forward(const Tensor& tokens) {
  const Tensor h = tokens + attention(norm1(tokens));
  return h + mlp(norm2(h));
}

void ParallelTransformerBlockImpl::loadFrom(TransformerBlockImpl& whole) {
  copyInto(norm1->weight, whole.norm1->weight);
  copyInto(norm1->bias, whole.norm1->bias);
  copyInto(norm2->weight, whole.norm2->weight);
  copyInto(norm2->bias, whole.norm2->bias);
  const auto& a = whole.attention;
  attention->loadShard(a->in_proj_weight, a->in_proj_bias, a->out_proj->weight, a->out_proj->bias);
  mlp->fc1->loadShard(whole.fc1->weight, whole.fc1->bias);
  mlp->fc2->loadShard(whole.fc2->weight, whole.fc2->bias);
}

void ParallelTransformerBlockImpl::storeInto(TransformerBlockImpl& whole) {
  Communicator& tp = *tp_;
  copyInto(whole.norm1->weight, norm1->weight);
  copyInto(whole.norm1->bias, norm1->bias);
  copyInto(whole.norm2->weight, norm2->weight);
  copyInto(whole.norm2->bias, norm2->bias);
  auto& a = whole.attention;
  copyInto(a->in_proj_weight, gatherInProjection(attention->in_proj_weight, tp));
  copyInto(a->in_proj_bias, gatherInProjection(attention->in_proj_bias, tp));
  copyInto(a->out_proj->weight, gatherColumns(attention->out_proj->weight, tp));
  copyInto(a->out_proj->bias, attention->out_proj->bias);
  copyInto(whole.fc1->weight, gatherRows(mlp->fc1->weight, tp));
  copyInto(whole.fc1->bias, gatherRows(mlp->fc1->bias, tp));
  copyInto(whole.fc2->weight, gatherColumns(mlp->fc2->weight, tp));
  copyInto(whole.fc2->bias, mlp->fc2->bias);
}

nn::Sequential makeTensorParallelVit(nn::Sequential& whole, const VitOptions& o, std::shared_ptr<Communicator> tp) {
  GYRE_USAGE_CHECK(tp != nullptr && o.heads % tp->size() == 0, "vit: the tensor-parallel group's ",
                   tp ? tp->size() : 0, " ranks do not divide its ", o.heads, " heads");
  nn::Sequential parallel;
  parallel->push_back("embedding", std::dynamic_pointer_cast<PatchEmbeddingImpl>(whole->ptr(0)->clone()));
  for (std::int64_t i = 0; i < o.depth; ++i) {
    ParallelTransformerBlock block(o, tp);
    block->loadFrom(*whole[static_cast<std::size_t>(1 + i)]->as<TransformerBlockImpl>());
    parallel->push_back("block" + std::to_string(i), block);
  }
  parallel->push_back("head",
                      std::dynamic_pointer_cast<ClassHeadImpl>(whole->ptr(static_cast<std::size_t>(1 + o.depth))->clone()));
  return parallel;
}

void gatherTensorParallelVit(nn::Sequential& parallel, nn::Sequential& whole) {
  ::torch::NoGradGuard noGrad;
  for (std::size_t i = 0; i < parallel->size(); ++i) {
    if (auto* block = parallel[i]->as<ParallelTransformerBlockImpl>()) {
      block->storeInto(*whole[i]->as<TransformerBlockImpl>());
      continue;
    }
    const auto from = parallel[i]->parameters();
    const auto to = whole[i]->parameters();
    GYRE_ENFORCE(from.size() == to.size(), "the vit's layer ", i, " differs between its two forms");
    for (std::size_t k = 0; k < from.size(); ++k) to[k].copy_(from[k]);
  }
}

}  // namespace gyre::train
