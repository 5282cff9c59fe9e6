// --zero 3: the trainer's model through gyre::torch::FullyShardedModel; what a rank's checkpoints hold.
#include <malloc.h>

#include <algorithm>

#include "train/trainer_loop.h"

namespace gyre::train::detail {

void Trainer::attachFullySharded() {
  if (!timeline_) timeline_ = gyre::torch::Timeline::fromEnvironment(group_.comm());
  gyre::torch::FullyShardedOptions f;
  f.timeline = timeline_;
  fsdp_ = deferredShards_
              ? std::make_unique<gyre::torch::FullyShardedModel>(group_.comm(), model_, std::move(madeShards_), f)
              : std::make_unique<gyre::torch::FullyShardedModel>(group_.comm(), model_, f);
  shardsModule_ = std::make_shared<::torch::nn::Module>("Shards");
  const std::vector<::torch::Tensor> shards = fsdp_->parameters();
  for (std::size_t k = 0; k < shards.size(); ++k) shardsModule_->register_parameter("unit" + std::to_string(k), shards[k]);
}

ChildMade Trainer::planDeferredShards() {
  if (zeroStage(o_) != 3 || !group_.comm() || layout_.pp > 1 || layout_.tp > 1) return {};
  deferredShards_ = true;
  return [this](std::size_t /*child*/, ::torch::nn::AnyModule& made) {
    if (::torch::Tensor shard = gyre::torch::takeShard(*made.ptr(), group_.rank(), group_.size()); shard.defined())
      madeShards_.push_back(std::move(shard));
  };
}

void Trainer::gatherShards() {
  if (!deferredShards_) {
    fsdp_->gatherParameters();
    return;
  }
  // Onto worker 0 alone, for model.pt, once what it needed to train is gone.
  if (group_.rank() == 0) dropTrainingState(fsdp_->parameters());
  fsdp_->gatherParametersOnto(0);
}

void Trainer::dropTrainingState(const std::vector<::torch::Tensor>& trained) {
  optimizer_->state().clear();
  if (dist_) dist_->stateOptimizer().state().clear();  // --zero 1 and 2: the shard optimizer's
  for (const ::torch::Tensor& p : trained) p.mutable_grad().reset();
  ::malloc_trim(0);  // what training freed goes back to the system before the whole model comes
}

::torch::nn::Module& Trainer::checkpointModel() {
  return shardsModule_ ? *shardsModule_ : ownLayers_ ? *ownLayers_ : *model_;
}

::torch::optim::Optimizer& Trainer::checkpointOptimizer() {
  return dist_ ? dist_->stateOptimizer() : *optimizer_;
}

double Trainer::shardedTestAccuracy() {
  // Each rank its share of the test set, in as many forward passes as every other rank: each
  // pass gathers the parameters with all of them.
  const gyre::data::Dataset& test = data_.test;
  const auto [first, last] = testShare(group_.rank(), world_);
  const std::int64_t most = (test.size() + world_ - 1) / world_;
  const std::int64_t passes = std::max<std::int64_t>(1, (most + kEvalChunk - 1) / kEvalChunk);
  double correct = 0;
  ::torch::NoGradGuard noGrad;
  model_->eval();
  for (std::int64_t k = 0; k < passes; ++k) {
    const std::int64_t b = first + (last - first) * k / passes;
    const std::int64_t e = first + (last - first) * (k + 1) / passes;
    const ::torch::Tensor predicted = fsdp_->forward(test.images.slice(0, b, e)).argmax(1);
    correct += static_cast<double>(predicted.eq(test.labels.slice(0, b, e)).sum().item<std::int64_t>());
  }
  model_->train();
  return accuracyOver(correct, static_cast<double>(last - first));
}

}  // namespace gyre::train::detail
