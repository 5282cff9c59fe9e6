// The built-in trainer's tensor parallelism (--tp): this rank's share of the vit, and the whole
// model gathered at the end. The groups are splitMesh()'s, evaluation testAccuracy()'s.
#include "gyre/torch/deferred.h"
#include "train/trainer_loop.h"
#include "train/vit_parallel.h"

namespace gyre::train::detail {

ChildMade Trainer::planTensorShares() {
  if (layout_.tp == 1) return {};
  deferredWhole_ = true;
  tensorShares_ = ::torch::nn::Sequential();
  return [this](std::size_t child, ::torch::nn::AnyModule& made) {
    withGeneratorPutBack([&] { appendTensorParallelLayer(tensorShares_, *made.ptr(), vitOptions(), tensorComm_); });
    gyre::torch::releaseParameters(*made.ptr());
    // Beside --pp, the shares of other ranks' stages go too.
    if (layout_.pp > 1 && !ownsLayer(child)) gyre::torch::releaseParameters(*tensorShares_->ptr(child));
  };
}

void Trainer::attachTensorParallel() {
  wholeModel_ = model_;
  if (deferredWhole_) {
    model_ = tensorShares_;
  } else {
    withGeneratorPutBack([&] { model_ = makeTensorParallelVit(wholeModel_, vitOptions(), tensorComm_); });
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
