// The built-in trainer's tensor parallelism (--tp): this rank's share of the vit, and the whole
// model gathered at the end. The groups are splitMesh()'s, evaluation testAccuracy()'s.
#include "gyre/torch/checkpoint.h"  // torchRngState
#include "gyre/torch/deferred.h"
#include "train/trainer_loop.h"
#include "train/vit_parallel.h"

namespace gyre::train::detail {

namespace {

VitOptions vitOptionsOf(const TrainOptions& o) {
  return {.depth = o.vitDepth, .width = o.vitWidth, .heads = o.vitHeads, .patch = o.vitPatch};
}

}  // namespace

ChildMade Trainer::planTensorShares() {
  // --balance time: rank 0 measures the whole model's layers (attachPipeline).
  if (layout_.tp == 1 || o_.balance == "time") return {};
  deferredWhole_ = true;
  tensorShares_ = ::torch::nn::Sequential();
  return [this](std::size_t /*child*/, ::torch::nn::Module& made) {
    // The generator put back: the whole model's values are drawn as on every other layout.
    const std::string rng = gyre::torch::torchRngState();
    appendTensorParallelLayer(tensorShares_, made, vitOptionsOf(o_), tensorComm_);
    gyre::torch::setTorchRngState(rng);
    gyre::torch::releaseParameters(made);
  };
}

void Trainer::attachTensorParallel() {
  wholeModel_ = model_;
  if (deferredWhole_) {
    model_ = tensorShares_;
  } else {
    const std::string rng = gyre::torch::torchRngState();  // as planTensorShares: every layout's draws
    model_ = makeTensorParallelVit(wholeModel_, vitOptionsOf(o_), tensorComm_);
    gyre::torch::setTorchRngState(rng);
  }
  tensorShares_ = ::torch::nn::Sequential(nullptr);
}

void Trainer::gatherTensorParallel() {
  if (!deferredWhole_) {
    gatherTensorParallelVit(model_, wholeModel_, *tensorComm_);
    return;
  }
  // Onto worker 0 alone, for model.pt, once what it needed to train is gone: its group's
  // shares (every stage's, gathered along the pipeline already).
  if (layout_.replica() != 0 || layout_.stageRank() != 0) return;
  if (group_.rank() == 0) dropTrainingState(model_->parameters());
  gatherTensorParallelVit(model_, wholeModel_, *tensorComm_, 0);
}

}  // namespace gyre::train::detail
