#include "torch/shard_optimizer.h"

#include "gyre/errors.h"

namespace gyre::torch {
namespace {

namespace optim = ::torch::optim;

template <typename Kind, typename Options>
std::shared_ptr<optim::Optimizer> sameKind(optim::Optimizer& like, std::vector<optim::OptimizerParamGroup> groups) {
  return std::make_shared<Kind>(std::move(groups), static_cast<const Options&>(like.defaults()));
}

}  // namespace

ShardOptimizer makeShardOptimizer(optim::Optimizer& like, std::vector<std::vector<::torch::Tensor>> groups) {
  ShardOptimizer shard;
  std::vector<optim::OptimizerParamGroup> shardGroups;
  auto& userGroups = like.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) continue;
    shardGroups.emplace_back(std::move(groups[g]), userGroups[g].options().clone());
    shard.userGroups.push_back(g);
  }
  if (dynamic_cast<optim::SGD*>(&like)) {
    shard.optimizer = sameKind<optim::SGD, optim::SGDOptions>(like, std::move(shardGroups));
  } else if (dynamic_cast<optim::AdamW*>(&like)) {
    shard.optimizer = sameKind<optim::AdamW, optim::AdamWOptions>(like, std::move(shardGroups));
  } else if (dynamic_cast<optim::Adam*>(&like)) {
    shard.optimizer = sameKind<optim::Adam, optim::AdamOptions>(like, std::move(shardGroups));
  } else if (dynamic_cast<optim::Adagrad*>(&like)) {
    shard.optimizer = sameKind<optim::Adagrad, optim::AdagradOptions>(like, std::move(shardGroups));
  } else if (dynamic_cast<optim::RMSprop*>(&like)) {
    shard.optimizer = sameKind<optim::RMSprop, optim::RMSpropOptions>(like, std::move(shardGroups));
  } else {
    throw InvalidArgument(
        "DistributedOptimizer: shardOptimizerState splits the optimizer step elementwise, which SGD, Adam, AdamW, "
        "Adagrad and RMSprop allow; this optimizer is none of them (turn the sharding off for it)");
  }
  return shard;
}

void copyGroupOptions(optim::Optimizer& from, ShardOptimizer& to) {
  auto& source = from.param_groups();
  auto& target = to.optimizer->param_groups();
  for (std::size_t k = 0; k < target.size(); ++k) target[k].set_options(source[to.userGroups[k]].options().clone());
}

}  // namespace gyre::torch
