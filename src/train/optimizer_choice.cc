#include "train/optimizer_choice.h"

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/optimizers.h"

namespace gyre::train {
namespace optim = ::torch::optim;

std::shared_ptr<optim::Optimizer> makeOptimizer(const TrainOptions& o, std::vector<::torch::Tensor> params,
                                                double lr) {
  if (o.optimizer == "sgd")
    return std::make_shared<optim::SGD>(
        std::move(params), optim::SGDOptions(lr).momentum(o.momentum).weight_decay(o.weightDecay));
  if (o.optimizer == "adam")
    return std::make_shared<optim::Adam>(std::move(params),
                                         optim::AdamOptions(lr).weight_decay(o.weightDecay));
  if (o.optimizer == "lars")
    return std::make_shared<gyre::torch::Lars>(
        std::move(params), gyre::torch::LarsOptions(lr).momentum(o.momentum).weight_decay(o.weightDecay));
  if (o.optimizer == "lamb")
    return std::make_shared<gyre::torch::Lamb>(std::move(params),
                                               gyre::torch::LambOptions(lr).weight_decay(o.weightDecay));
  GYRE_THROW(InvalidArgument, "unknown --optimizer ", o.optimizer, " (sgd, adam, lars or lamb)");
}

void applyOptimizerFlags(const TrainOptions& o, optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    auto& options = group.options();
    if (auto* sgd = dynamic_cast<optim::SGDOptions*>(&options)) {
      sgd->momentum(o.momentum).weight_decay(o.weightDecay);
    } else if (auto* adam = dynamic_cast<optim::AdamOptions*>(&options)) {
      adam->weight_decay(o.weightDecay);
    } else if (auto* lars = dynamic_cast<gyre::torch::LarsOptions*>(&options)) {
      lars->momentum(o.momentum).weight_decay(o.weightDecay);
    } else if (auto* lamb = dynamic_cast<gyre::torch::LambOptions*>(&options)) {
      lamb->weight_decay(o.weightDecay);
    }
  }
}

}  // namespace gyre::train
