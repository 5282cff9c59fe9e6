// Training state kept as flat tensors over parts of parameters (ZeRO's shards: DistributedOptimizer
// with shardOptimizerState, FullyShardedModel), taken back to whole parameters and cut again for
// another layout: what lets a checkpoint of one layout resume on another (DeepSpeed's universal
// checkpoints). docs/checkpoints.md.
//
//   FlatLayout saved = dist.stateLayout(model->parameters());           // when saving, beside the state
//   ...
//   std::vector<ParamStatePtr> whole(params.size());
//   gatherFlatStates(savedShardOptimizer, saved, params, whole);       // once per saved rank
//   setFlatStates(newShardOptimizer, newLayout, params, whole);         // this rank's new shards
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace gyre::torch {

// Elements [at, at + length) of a flat tensor are elements [begin, begin + length) of parameter
// `param` (an index into a list of the whole model's parameters), flattened.
struct FlatPiece {
  std::size_t param = 0;
  std::int64_t begin = 0;
  std::int64_t at = 0;
  std::int64_t length = 0;
  bool operator==(const FlatPiece&) const = default;
};

// Of each flat tensor (in its optimizer's order of parameters), its size and its pieces.
struct FlatTensor {
  std::int64_t numel = 0;
  std::vector<FlatPiece> pieces;
  bool operator==(const FlatTensor&) const = default;
};
using FlatLayout = std::vector<FlatTensor>;

// The layout as one line of text ("numel:param,begin,at,length;...|..."), and back. Parsing
// throws InvalidArgument naming what is wrong.
std::string flatLayoutText(const FlatLayout& layout);
FlatLayout parseFlatLayout(const std::string& text);

// The flat that covers elements [begin, end) of parameters laid end to end (`offsets[k]` is where
// the parameter of `numels[k]` elements starts; its pieces name it `indices[k]`): what both ZeRO
// layouts cut.
FlatTensor piecesOfRange(const std::vector<std::int64_t>& numels, const std::vector<std::int64_t>& offsets,
                         const std::vector<std::size_t>& indices, std::int64_t begin, std::int64_t end);

using ParamStatePtr = std::unique_ptr<::torch::optim::OptimizerParamState>;

// The per-parameter state of each parameter of `params` that the flats of `optimizer` (laid out
// as `layout`) hold: every state tensor filled in where a piece covers it, the scalars (Adam's
// step, ...) taken from the flat. `whole` has one entry per parameter; entries stay null where no
// flat with a state covers the parameter. For SGD, Adam, AdamW, Adagrad and RMSprop (ZeRO's
// elementwise optimizers); throws InvalidArgument for any other.
void gatherFlatStates(::torch::optim::Optimizer& optimizer, const FlatLayout& layout,
                      const std::vector<::torch::Tensor>& params, std::vector<ParamStatePtr>& whole);

// The other way: each flat of `optimizer` (laid out as `layout`) gets the state cut from the
// whole parameters' states (none where its parameters have none). Throws InvalidArgument when the
// layout does not fit the optimizer or the states (another kind of optimizer).
void setFlatStates(::torch::optim::Optimizer& optimizer, const FlatLayout& layout,
                   const std::vector<::torch::Tensor>& params, const std::vector<ParamStatePtr>& whole);

// A copy of `state` (SGD's, Adam's, ... as gatherFlatStates takes) with each of its tensors f(it),
// undefined ones left so: a parameter's state cut as the parameter is (tensor parallelism's shares).
ParamStatePtr mapParamState(const ::torch::optim::OptimizerParamState& state,
                            const std::function<::torch::Tensor(const ::torch::Tensor&)>& f);
// One state from the states of a parameter's parts (of one kind): each tensor f(the parts' tensors),
// the scalars (Adam's step, ...) the first part's.
ParamStatePtr joinParamStates(const std::vector<const ::torch::optim::OptimizerParamState*>& parts,
                              const std::function<::torch::Tensor(const std::vector<::torch::Tensor>&)>& f);

// Values: the flats' elements into the parameters they cover, and back.
void gatherFlatValues(const std::vector<::torch::Tensor>& flats, const FlatLayout& layout,
                      const std::vector<::torch::Tensor>& params);
void setFlatValues(const std::vector<::torch::Tensor>& flats, const FlatLayout& layout,
                   const std::vector<::torch::Tensor>& params);

// The place of each of `params` in it, by its TensorImpl (libtorch keys optimizer state so too).
std::unordered_map<const void*, std::size_t> parameterIndex(const std::vector<::torch::Tensor>& params);

// The parameters of an optimizer, group after group.
std::vector<::torch::Tensor> optimizerParameters(const ::torch::optim::Optimizer& optimizer);

}  // namespace gyre::torch
