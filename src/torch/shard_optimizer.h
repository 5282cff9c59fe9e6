// The optimizer of a rank's shard when DistributedOptimizer shards the optimizer step (ZeRO
// stage 1): the same kind of optimizer as the one the user wraps, with the same options per
// group, over flat tensors that alias this rank's part of the parameters and of the reduced
// gradients. Only elementwise optimizers can be split this way.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace gyre::torch {

struct ShardOptimizer {
  std::shared_ptr<::torch::optim::Optimizer> optimizer;
  std::vector<std::size_t> userGroups;  // the user's group of each of optimizer's groups
};

// `groups[g]` holds the shard tensors of the user's group g (empty groups are left out). Throws
// InvalidArgument unless `like` is SGD, Adam, AdamW, Adagrad or RMSprop.
ShardOptimizer makeShardOptimizer(::torch::optim::Optimizer& like, std::vector<std::vector<::torch::Tensor>> groups);

// Copies the user's current group options (a learning-rate schedule changes them) into the shard's.
void copyGroupOptions(::torch::optim::Optimizer& from, ShardOptimizer& to);

}  // namespace gyre::torch
