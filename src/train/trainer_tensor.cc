// The built-in trainer's tensor parallelism (--tp): this rank's share of the vit, and the whole
// model gathered at the end. The groups are splitMesh()'s, evaluation testAccuracy()'s.
#include "train/trainer_loop.h"
#include "train/vit_parallel.h"

namespace gyre::train::detail {

void Trainer::attachTensorParallel() {
  wholeModel_ = model_;
  model_ = makeTensorParallelVit(
      wholeModel_, {.depth = o_.vitDepth, .width = o_.vitWidth, .heads = o_.vitHeads, .patch = o_.vitPatch},
      tensorComm_);
}

void Trainer::gatherTensorParallel() {
  gatherTensorParallelVit(model_, wholeModel_, *tensorComm_);
}

}  // namespace gyre::train::detail
