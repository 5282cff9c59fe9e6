#include "train/vit_parallel.h"

#include "common/check.h"
#include "gyre/torch/deferred.h"

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

// Rank `rank`'s slice of `t` along `dim` among `ranks`, contiguous.
Tensor sliceOf(const Tensor& t, std::int64_t dim, int ranks, int rank) {
  GYRE_ENFORCE(t.dim() > dim && t.size(dim) % ranks == 0, "a tensor of shape ", t.sizes(), " does not cut into ",
               ranks, " shares along dimension ", dim);
  const std::int64_t n = t.size(dim) / ranks;
  return t.detach().narrow(dim, rank * n, n).clone(::torch::MemoryFormat::Contiguous);
}

// [3 · n, rest...] as [3, n, rest...] (the attention's queries, keys and values), and back.
Tensor asThreeParts(const Tensor& t) {
  std::vector<std::int64_t> sizes = {3, t.size(0) / 3};
  for (std::int64_t d = 1; d < t.dim(); ++d) sizes.push_back(t.size(d));
  return t.reshape(sizes);
}
Tensor fromThreeParts(const Tensor& t) {
  std::vector<std::int64_t> sizes = {3 * t.size(1)};
  for (std::int64_t d = 2; d < t.dim(); ++d) sizes.push_back(t.size(d));
  return t.reshape(sizes);
}

// A whole TransformerBlock's parameter `name` (norm1.weight, fc1.bias, ...): its name in a
// ParallelTransformerBlock and how it is cut.
std::pair<std::string, TensorCut> blockShare(const std::string& name) {
  static const std::vector<std::tuple<std::string, std::string, TensorCut>> table = {
      {"norm1.weight", "norm1.weight", TensorCut::kWhole},
      {"norm1.bias", "norm1.bias", TensorCut::kWhole},
      {"attention.in_proj_weight", "attention.in_proj_weight", TensorCut::kInProjection},
      {"attention.in_proj_bias", "attention.in_proj_bias", TensorCut::kInProjection},
      {"attention.out_proj.weight", "attention.out_proj.weight", TensorCut::kColumns},
      {"attention.out_proj.bias", "attention.out_proj.bias", TensorCut::kWhole},
      {"norm2.weight", "norm2.weight", TensorCut::kWhole},
      {"norm2.bias", "norm2.bias", TensorCut::kWhole},
      {"fc1.weight", "mlp.fc1.weight", TensorCut::kRows},
      {"fc1.bias", "mlp.fc1.bias", TensorCut::kRows},
      {"fc2.weight", "mlp.fc2.weight", TensorCut::kColumns},
      {"fc2.bias", "mlp.fc2.bias", TensorCut::kWhole}};
  for (const auto& [whole, parallel, cut] : table)
    if (whole == name) return {parallel, cut};
  GYRE_ENFORCE(false, "the vit's transformer block has a parameter ", name, " that tensor parallelism does not cut");
  return {};
}

void copyInto(const Tensor& to, const Tensor& from) {
  ::torch::NoGradGuard noGrad;
  to.copy_(from);
}

// `parallel`'s parameters, each beside its share of `whole`'s.
std::vector<std::pair<Tensor, TensorShare>> sharesOf(const nn::Sequential& parallel, const nn::Sequential& whole) {
  const std::vector<TensorShare> shares = tensorParallelVitShares(whole);
  const auto params = parallel->named_parameters();
  GYRE_ENFORCE(params.size() == shares.size(), "the tensor-parallel vit has ", params.size(),
               " parameters, its whole twin's shares ", shares.size());
  std::vector<std::pair<Tensor, TensorShare>> out;
  for (std::size_t k = 0; k < shares.size(); ++k) {
    GYRE_ENFORCE(params[k].key() == shares[k].name, "the tensor-parallel vit's parameter ", k, " is ",
                 params[k].key(), ", not ", shares[k].name);
    out.emplace_back(params[k].value(), shares[k]);
  }
  return out;
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

Tensor cutShare(const Tensor& whole, TensorCut cut, int ranks, int rank) {
  switch (cut) {
    case TensorCut::kWhole:
      return whole.detach().clone();
    case TensorCut::kRows:
      return sliceOf(whole, 0, ranks, rank);
    case TensorCut::kColumns:
      return sliceOf(whole, 1, ranks, rank);
    case TensorCut::kInProjection:
      return fromThreeParts(sliceOf(asThreeParts(whole.detach()), 1, ranks, rank));
  }
  return {};
}

Tensor joinShares(const std::vector<Tensor>& shares, TensorCut cut) {
  GYRE_ENFORCE(!shares.empty(), "no shares to join");
  switch (cut) {
    case TensorCut::kWhole:
      return shares.front().detach().clone();
    case TensorCut::kRows:
      return ::torch::cat(shares, 0);
    case TensorCut::kColumns:
      return ::torch::cat(shares, 1);
    case TensorCut::kInProjection: {
      std::vector<Tensor> parts;
      for (const Tensor& s : shares) parts.push_back(asThreeParts(s));
      return fromThreeParts(::torch::cat(parts, 1));
    }
  }
  return {};
}

std::vector<TensorShare> tensorParallelVitShares(const nn::Sequential& whole) {
  std::vector<TensorShare> out;
  for (const auto& layer : whole->named_children()) {
    const bool block = layer.value()->as<TransformerBlockImpl>() != nullptr;
    for (const auto& p : layer.value()->named_parameters()) {
      TensorShare share{layer.key() + "." + p.key(), out.size(), TensorCut::kWhole};
      if (block) {
        const auto [name, cut] = blockShare(p.key());
        share.name = layer.key() + "." + name;
        share.cut = cut;
      }
      out.push_back(std::move(share));
    }
  }
  return out;
}

nn::Sequential makeTensorParallelVit(nn::Sequential& whole, const VitOptions& o, std::shared_ptr<Communicator> tp) {
  GYRE_USAGE_CHECK(tp != nullptr && o.heads % tp->size() == 0, "vit: the tensor-parallel group's ",
                   tp ? tp->size() : 0, " ranks do not divide its ", o.heads, " heads");
  nn::Sequential parallel;
  for (std::size_t c = 0; c < whole->size(); ++c) appendTensorParallelLayer(parallel, *whole->ptr(c), o, tp);
  return parallel;
}

void appendTensorParallelLayer(nn::Sequential& parallel, nn::Module& layer, const VitOptions& o,
                               std::shared_ptr<Communicator> tp) {
  if (const auto* embedding = layer.as<PatchEmbeddingImpl>()) {
    parallel->push_back("embedding", std::dynamic_pointer_cast<PatchEmbeddingImpl>(embedding->clone()));
  } else if (const auto* head = layer.as<ClassHeadImpl>()) {
    parallel->push_back("head", std::dynamic_pointer_cast<ClassHeadImpl>(head->clone()));
  } else {
    const auto* block = layer.as<TransformerBlockImpl>();
    GYRE_ENFORCE(block != nullptr, "vit: layer ", parallel->size(), " is not the embedding, a block or the head");
    ParallelTransformerBlock share(o, tp);
    const auto params = share->named_parameters();
    for (const auto& p : block->named_parameters()) {
      const auto [name, cut] = blockShare(p.key());
      copyInto(params[name], cutShare(p.value(), cut, tp->size(), tp->rank()));
    }
    parallel->push_back("block" + std::to_string(parallel->size() - 1), share);
  }
}

void loadTensorParallelVit(const nn::Sequential& parallel, const nn::Sequential& whole, int ranks, int rank) {
  const std::vector<Tensor> from = whole->parameters();
  for (const auto& [param, share] : sharesOf(parallel, whole)) copyInto(param, cutShare(from[share.whole], share.cut, ranks, rank));
}

void gatherTensorParallelVit(nn::Sequential& parallel, nn::Sequential& whole, Communicator& tp, int root) {
  const std::vector<Tensor> to = whole->parameters();
  const bool keeps = root < 0 || tp.rank() == root;
  for (const auto& [param, share] : sharesOf(parallel, whole)) {
    const Tensor& target = to[share.whole];
    const Tensor all = share.cut == TensorCut::kWhole ? Tensor() : allgatherStacked(param, tp);
    if (!keeps) continue;
    const Tensor value = share.cut == TensorCut::kWhole ? param : joinShares(all.unbind(0), share.cut);
    gyre::torch::materialiseTensor(target);
    copyInto(target, value);
    // Not one of a bucket's parameters (--zero's flat buckets): their storage is the bucket's.
    if (root >= 0 && gyre::torch::holdsStorageAlone(param)) gyre::torch::releaseTensor(param);
  }
}

std::shared_ptr<nn::Module> tensorParallelVitShapes(const nn::Sequential& whole, int ranks, int rank) {
  auto root = std::make_shared<nn::Module>("TensorParallelVit");
  const std::vector<Tensor> from = whole->parameters();
  for (const TensorShare& share : tensorParallelVitShares(whole)) {
    nn::Module* at = root.get();
    std::size_t begin = 0;
    for (std::size_t dot = share.name.find('.'); dot != std::string::npos; dot = share.name.find('.', begin)) {
      const std::string part = share.name.substr(begin, dot - begin);
      std::shared_ptr<nn::Module> child;
      if (const auto* found = at->named_children().find(part)) {
        child = *found;
      } else {
        child = at->register_module(part, std::make_shared<nn::Module>(part));
      }
      at = child.get();
      begin = dot + 1;
    }
    at->register_parameter(share.name.substr(begin), ::torch::zeros_like(cutShare(from[share.whole], share.cut, ranks, rank)));
  }
  return root;
}

}  // namespace gyre::train
