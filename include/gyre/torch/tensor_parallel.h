// Tensor parallelism (Megatron-LM's): layers whose weights are split across the ranks of a
// tensor-parallel group, each rank computing its share of every sample, with the conjugate pair of
// communication functions that keeps forward and backward exact:
//
//   f = copyToTensorParallel:     identity forward, allreduce (sum) of the gradient backward;
//   g = reduceFromTensorParallel: allreduce (sum) forward, identity backward.
//
// A column-parallel Linear splits the output features (rank r holds rows r·out/T .. of the
// weight): f, then its own matmul; its outputs are this rank's columns. A row-parallel Linear
// splits the input features: its matmul on this rank's columns, then g, then the bias. The MLP
// block is column → GeLU → row, one allreduce forward and one backward; attention splits the heads
// (each rank its heads' query, key and value projections, column-parallel) and ends with a
// row-parallel output projection. Every output and gradient equals the unsharded layer's; the
// shards of a layer made after the same torch::manual_seed on every rank are the slices of the
// unsharded layer made after that seed (the constructors draw the whole weight, then keep their
// slice), so a tensor-parallel model starts as its unsharded twin.
//
//   auto tp = world->split(world->rank() / T, world->rank());  // groups of T consecutive ranks
//   gyre::torch::ParallelMlp mlp(gyre::torch::ParallelMlpOptions(512), tp);
//
// Parameters that are not split (layer norms, a row-parallel Linear's bias) are the same on every
// rank of the group and get the same gradient there. Every rank of the group must run the same
// layers in the same order (their collectives are matched by order).
//
// Thread-safety: one training thread per module, as any libtorch module.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "gyre/communicator.h"
#include "gyre/torch/module.h"

namespace gyre::torch {

// f: x forward; the gradient summed over the group's ranks backward.
::torch::Tensor copyToTensorParallel(const ::torch::Tensor& x, const std::shared_ptr<Communicator>& comm);
// g: x summed over the group's ranks forward; the gradient as it is backward.
::torch::Tensor reduceFromTensorParallel(const ::torch::Tensor& x, const std::shared_ptr<Communicator>& comm);
// Every rank's x concatenated along the last dimension forward; this rank's slice of the
// gradient backward.
::torch::Tensor gatherFromTensorParallel(const ::torch::Tensor& x, const std::shared_ptr<Communicator>& comm);
// This rank's slice of x's last dimension forward (it must divide by the group's size); the
// gradients gathered backward.
::torch::Tensor scatterToTensorParallel(const ::torch::Tensor& x, const std::shared_ptr<Communicator>& comm);

struct ColumnParallelLinearOptions {
  ColumnParallelLinearOptions(std::int64_t in, std::int64_t out) : in_(in), out_(out) {}
  TORCH_ARG(std::int64_t, in);
  TORCH_ARG(std::int64_t, out);  // of the whole layer; the group's size must divide it
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, gather_output) = false;  // true: every rank gets all `out` features
};

// y = x Wᵀ + b with W's rows (the output features) split: weight [out/T, in], bias [out/T].
class ColumnParallelLinearImpl : public ::torch::nn::Cloneable<ColumnParallelLinearImpl> {
 public:
  ColumnParallelLinearImpl(ColumnParallelLinearOptions options, std::shared_ptr<Communicator> comm);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& input);
  // Takes this rank's slice of an unsharded layer's weight [out, in] and bias [out].
  void loadShard(const ::torch::Tensor& fullWeight, const ::torch::Tensor& fullBias = {});

  ColumnParallelLinearOptions options;
  ::torch::Tensor weight, bias;

 private:
  std::shared_ptr<Communicator> comm_;
};
GYRE_TORCH_MODULE(ColumnParallelLinear);

struct RowParallelLinearOptions {
  RowParallelLinearOptions(std::int64_t in, std::int64_t out) : in_(in), out_(out) {}
  TORCH_ARG(std::int64_t, in);  // of the whole layer; the group's size must divide it
  TORCH_ARG(std::int64_t, out);
  TORCH_ARG(bool, bias) = true;
  // true: the input is already split (a column-parallel layer's output); false: the whole input,
  // which the layer splits itself.
  TORCH_ARG(bool, input_is_parallel) = true;
};

// y = x Wᵀ + b with W's columns (the input features) split: weight [out, in/T], and the bias
// [out] whole, added once after the sum over the ranks.
class RowParallelLinearImpl : public ::torch::nn::Cloneable<RowParallelLinearImpl> {
 public:
  RowParallelLinearImpl(RowParallelLinearOptions options, std::shared_ptr<Communicator> comm);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& input);
  void loadShard(const ::torch::Tensor& fullWeight, const ::torch::Tensor& fullBias = {});

  RowParallelLinearOptions options;
  ::torch::Tensor weight, bias;

 private:
  std::shared_ptr<Communicator> comm_;
};
GYRE_TORCH_MODULE(RowParallelLinear);

struct ParallelMlpOptions {
  explicit ParallelMlpOptions(std::int64_t width) : width_(width), hidden_(4 * width) {}
  TORCH_ARG(std::int64_t, width);
  TORCH_ARG(std::int64_t, hidden);  // default 4 × width; the group's size must divide it
};

// The transformer's MLP block: column-parallel width → hidden, GeLU, row-parallel hidden → width.
class ParallelMlpImpl : public ::torch::nn::Cloneable<ParallelMlpImpl> {
 public:
  ParallelMlpImpl(ParallelMlpOptions options, std::shared_ptr<Communicator> comm);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& input);  // [..., width] → [..., width]

  ParallelMlpOptions options;
  ColumnParallelLinear fc1{nullptr};
  RowParallelLinear fc2{nullptr};

 private:
  std::shared_ptr<Communicator> comm_;
};
GYRE_TORCH_MODULE(ParallelMlp);

struct ParallelAttentionOptions {
  ParallelAttentionOptions(std::int64_t width, std::int64_t heads) : width_(width), heads_(heads) {}
  TORCH_ARG(std::int64_t, width);
  TORCH_ARG(std::int64_t, heads);  // the heads must divide the width, the group's size the heads
};

// Multi-head self-attention with the heads split across the ranks: rank r computes heads
// r·H/T .. with its slices of the query, key and value projections (in_proj_weight
// [3·width/T, width]: its queries', keys' and values' rows), and the output projection is
// row-parallel. Equal to torch::nn::MultiheadAttention with the same weights (loadShard).
class ParallelAttentionImpl : public ::torch::nn::Cloneable<ParallelAttentionImpl> {
 public:
  ParallelAttentionImpl(ParallelAttentionOptions options, std::shared_ptr<Communicator> comm);
  void reset() override;
  ::torch::Tensor forward(const ::torch::Tensor& input);  // [batch, sequence, width], batch first
  // Takes this rank's heads of an unsharded attention, laid out as torch::nn::MultiheadAttention's:
  // inProjWeight [3·width, width] (queries, keys, values), inProjBias [3·width], the output
  // projection's weight [width, width] and bias [width].
  void loadShard(const ::torch::Tensor& inProjWeight, const ::torch::Tensor& inProjBias,
                 const ::torch::Tensor& outWeight, const ::torch::Tensor& outBias);

  ParallelAttentionOptions options;
  ::torch::Tensor in_proj_weight, in_proj_bias;
  RowParallelLinear out_proj{nullptr};

 private:
  void loadInProj(const ::torch::Tensor& inProjWeight, const ::torch::Tensor& inProjBias);
  std::shared_ptr<Communicator> comm_;
};
GYRE_TORCH_MODULE(ParallelAttention);

}  // namespace gyre::torch
