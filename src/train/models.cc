#include "train/models.h"

#include "gyre/errors.h"
#include "gyre/torch/sync_batch_norm.h"

namespace gyre::train {

namespace nn = ::torch::nn;

std::vector<std::string> modelNames() {
  return {"mlp", "cnn", "vit"};
}

nn::Sequential makeModel(const std::string& name, bool syncBn, const VitOptions& vit) {
  if (syncBn && name != "cnn")
    throw InvalidArgument("batch normalisation (--sync-bn) is for the cnn, not " + name);
  if (name == "mlp") {
    return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256), nn::ReLU(),
                          nn::Linear(256, 10));
  }
  if (name == "cnn" && syncBn) {
    using gyre::torch::SyncBatchNorm;
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), SyncBatchNorm(32), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)),
                          SyncBatchNorm(64), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                          nn::Linear(64 * 7 * 7, 128), nn::ReLU(), nn::Linear(128, 10));
  }
  if (name == "cnn") {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                          nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                          nn::Flatten(), nn::Linear(64 * 7 * 7, 128), nn::ReLU(), nn::Linear(128, 10));
  }
  if (name == "vit") return makeVit(vit);
  throw InvalidArgument("unknown model '" + name + "': the built-in models are mlp, cnn and vit");
}

}  // namespace gyre::train
