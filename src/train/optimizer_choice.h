// The update rule of `gyre train --optimizer`: libtorch's SGD and Adam, or gyre's LARS and LAMB
// (gyre/torch/optimizers.h) for large batches. The flags (--momentum, --weight-decay) rule over
// what a checkpoint restores: applyOptimizerFlags sets them again after a resume.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "train/options.h"

namespace gyre::train {

std::shared_ptr<::torch::optim::Optimizer> makeOptimizer(const TrainOptions& o,
                                                         std::vector<::torch::Tensor> params, double lr);

void applyOptimizerFlags(const TrainOptions& o, ::torch::optim::Optimizer& optimizer);

}  // namespace gyre::train
