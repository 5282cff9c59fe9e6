// The built-in trainer's tensor parallelism (--tp): the layout's groups, this rank's share of the
// vit, evaluation by replica, and the whole model gathered at the end.
#include "train/trainer_loop.h"
#include "train/vit_parallel.h"

namespace gyre::train::detail {

void Trainer::attachTensorParallel() {
  wholeModel_ = model_;
  model_ = makeTensorParallelVit(
      wholeModel_, {.depth = o_.vitDepth, .width = o_.vitWidth, .heads = o_.vitHeads, .patch = o_.vitPatch},
      tensorComm_);
}

double Trainer::tensorParallelTestAccuracy() {
  // Each replica its share of the test set; every rank of a group in the same forward passes (they
  // compute them together), the first counting.
  const gyre::data::Dataset& test = data_.test;
  const std::int64_t n = test.size();
  const std::int64_t first = n * layout_.replica() / layout_.dp;
  const std::int64_t last = n * (layout_.replica() + 1) / layout_.dp;
  const double correct = correctPredictions(model_, first, last);
  const bool counts = layout_.tpRank() == 0;
  const std::vector<double> total =
      group_.sum({counts ? correct : 0, counts ? static_cast<double>(last - first) : 0});
  return total[1] > 0 ? total[0] / total[1] : 0;
}

void Trainer::gatherTensorParallel() {
  gatherTensorParallelVit(model_, wholeModel_);
}

}  // namespace gyre::train::detail
