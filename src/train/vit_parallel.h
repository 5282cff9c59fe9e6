// The vit (vit.h) with each transformer block split across a tensor-parallel group (--tp): the
// attention's heads and the MLP's hidden features divided among the group's ranks with
// gyre::torch's ParallelAttention and ParallelMlp (Megatron-LM's layers); the patch embedding, the
// layer norms and the head whole on every rank. Every rank of the group computes every sample and
// gets the same outputs, the unsplit model's up to rounding.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/torch/tensor_parallel.h"
#include "train/vit.h"

namespace gyre::train {

// One pre-norm block as TransformerBlock, its attention and MLP split: [N, tokens, width] both ways.
class ParallelTransformerBlockImpl : public ::torch::nn::Cloneable<ParallelTransformerBlockImpl> {
 public:
  ParallelTransformerBlockImpl(VitOptions options, std::shared_ptr<Communicator> tp);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& tokens);

  VitOptions options;
  ::torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  gyre::torch::ParallelAttention attention{nullptr};
  gyre::torch::ParallelMlp mlp{nullptr};

 private:
  std::shared_ptr<Communicator> tp_;
};
GYRE_TORCH_MODULE(ParallelTransformerBlock);

// How a parameter of the whole vit is cut across a group of T ranks: not at all (layer norms, the
// embedding and head, a row-parallel layer's bias), along its rows (a column-parallel layer: fc1),
// along its columns (a row-parallel layer: fc2, the attention's output projection), or as the
// attention's input projection [3 · width, ...], whose queries', keys' and values' rows are each
// cut (rank r holds heads r · H/T ..).
enum class TensorCut { kWhole, kRows, kColumns, kInProjection };

// Rank `rank`'s share of `whole` among `ranks`; a copy.
::torch::Tensor cutShare(const ::torch::Tensor& whole, TensorCut cut, int ranks, int rank);
// The whole tensor from every rank's share, in rank order.
::torch::Tensor joinShares(const std::vector<::torch::Tensor>& shares, TensorCut cut);

// One parameter of the tensor-parallel vit: its name there, the index of the whole vit's
// parameter it is a share of (in whole->parameters()), and how it is cut.
struct TensorShare {
  std::string name;
  std::size_t whole = 0;
  TensorCut cut = TensorCut::kWhole;
};
// Every parameter of the tensor-parallel twin of `whole` (a makeVit model), in the twin's
// parameters() order.
std::vector<TensorShare> tensorParallelVitShares(const ::torch::nn::Sequential& whole);

// The tensor-parallel twin of `whole` (makeVit(o)'s): its embedding and head copied, each block
// split with this rank's share of its weights. The group's size must divide o.heads.
::torch::nn::Sequential makeTensorParallelVit(::torch::nn::Sequential& whole, const VitOptions& o,
                                              std::shared_ptr<Communicator> tp);
// One layer of it, made from the whole model's `layer` (its embedding, a block or its head, in
// that order) and put at the end of `parallel`: what makes the twin while the whole model is made
// layer by layer, each layer given back as soon as its share is taken. Draws random numbers (a
// block's own, then overwritten).
void appendTensorParallelLayer(::torch::nn::Sequential& parallel, ::torch::nn::Module& layer, const VitOptions& o,
                               std::shared_ptr<Communicator> tp);
// Rank `rank`'s shares of `whole`'s values into its twin `parallel` (of a group of `ranks`).
void loadTensorParallelVit(const ::torch::nn::Sequential& parallel, const ::torch::nn::Sequential& whole,
                           int ranks, int rank);
// The trained weights back into `whole`: on every rank of the group `tp`, or with `root` on that
// rank of it alone (the others' `whole` is not touched; `whole` may hold no memory there, each
// tensor gets its own just before its values come, and each of root's shares that holds its
// storage alone gives its memory back once sent: the most root holds is the whole model and what
// is left of its share, and its `parallel` is spent). Collective over `tp`.
void gatherTensorParallelVit(::torch::nn::Sequential& parallel, ::torch::nn::Sequential& whole, Communicator& tp,
                             int root = -1);

// A module of zeros shaped as rank `rank`'s twin of `whole` (the same names, in the same order,
// with its shares' shapes), without a group: what a --tp checkpoint's part loads into. Its
// top-level children carry `whole`'s layer names.
std::shared_ptr<::torch::nn::Module> tensorParallelVitShapes(const ::torch::nn::Sequential& whole, int ranks,
                                                             int rank);

}  // namespace gyre::train
