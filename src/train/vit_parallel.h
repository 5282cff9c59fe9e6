// The vit (vit.h) with each transformer block split across a tensor-parallel group (--tp): the
// attention's heads and the MLP's hidden features divided among the group's ranks with
// gyre::torch's ParallelAttention and ParallelMlp (Megatron-LM's layers); the patch embedding, the
// layer norms and the head whole on every rank. Every rank of the group computes every sample and
// gets the same outputs, the unsplit model's up to rounding.
#pragma once

#include <torch/torch.h>

#include <memory>

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
  // This rank's share of an unsplit block's weights.
  void loadFrom(TransformerBlockImpl& whole);
  // Every rank's share gathered into an unsplit block. Collective over the group.
  void storeInto(TransformerBlockImpl& whole);

  VitOptions options;
  ::torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  gyre::torch::ParallelAttention attention{nullptr};
  gyre::torch::ParallelMlp mlp{nullptr};

 private:
  std::shared_ptr<Communicator> tp_;
};
GYRE_TORCH_MODULE(ParallelTransformerBlock);

// The tensor-parallel twin of `whole` (makeVit(o)'s): its embedding and head copied, each block
// split with this rank's share of its weights. The group's size must divide o.heads.
::torch::nn::Sequential makeTensorParallelVit(::torch::nn::Sequential& whole, const VitOptions& o,
                                              std::shared_ptr<Communicator> tp);
// The trained weights back into `whole`. Collective over the group.
void gatherTensorParallelVit(::torch::nn::Sequential& parallel, ::torch::nn::Sequential& whole);

}  // namespace gyre::train
