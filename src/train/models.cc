#include "train/models.h"

#include "gyre/errors.h"
#include "gyre/torch/sync_batch_norm.h"

namespace gyre::train {

namespace nn = ::torch::nn;

std::vector<std::string> modelNames() {
  return {"mlp", "cnn", "vit"};
}

std::string describe(const ModelShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" + std::to_string(shape.width) +
         " images in " + std::to_string(shape.classes) + " classes";
}

void checkModelShape(const std::string& name, const ModelShape& shape) {
  if (shape.channels < 1 || shape.height < 1 || shape.width < 1 || shape.classes < 2)
    throw InvalidArgument("a model needs images of at least 1x1 and at least 2 classes, not " + describe(shape));
  if (name == "vit" && shape != ModelShape{})
    throw InvalidArgument("the vit takes " + describe(ModelShape{}) + ", not " + describe(shape) +
                          ": use the mlp or the cnn");
  if (name == "cnn" && (shape.height < 4 || shape.width < 4))
    throw InvalidArgument("the cnn pools twice by 2 and needs images of at least 4x4, not " + describe(shape));
}

namespace {

// The mlp and the cnn are small: made whole, then shown child by child.
nn::Sequential shown(nn::Sequential model, const ChildMade& made) {
  if (made)
    for (std::size_t c = 0; c < model->size(); ++c) made(c, model->begin()[static_cast<std::ptrdiff_t>(c)]);
  return model;
}

}  // namespace

nn::Sequential makeModel(const std::string& name, bool syncBn, const VitOptions& vit, const ModelShape& shape,
                         const ChildMade& made) {
  if (syncBn && name != "cnn")
    throw InvalidArgument("batch normalisation (--sync-bn) is for the cnn, not " + name);
  if (name != "mlp" && name != "cnn" && name != "vit")
    throw InvalidArgument("unknown model '" + name + "': the built-in models are mlp, cnn and vit");
  checkModelShape(name, shape);
  const std::int64_t c = shape.channels, k = shape.classes;
  if (name == "mlp") {
    return shown(nn::Sequential(nn::Flatten(), nn::Linear(c * shape.height * shape.width, 512), nn::ReLU(),
                                nn::Linear(512, 256), nn::ReLU(), nn::Linear(256, k)),
                 made);
  }
  const std::int64_t features = 64 * (shape.height / 4) * (shape.width / 4);
  if (name == "cnn" && syncBn) {
    using gyre::torch::SyncBatchNorm;
    return shown(nn::Sequential(nn::Conv2d(nn::Conv2dOptions(c, 32, 3).padding(1)), SyncBatchNorm(32), nn::ReLU(),
                                nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)),
                                SyncBatchNorm(64), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                                nn::Linear(features, 128), nn::ReLU(), nn::Linear(128, k)),
                 made);
  }
  if (name == "cnn") {
    return shown(nn::Sequential(nn::Conv2d(nn::Conv2dOptions(c, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                nn::Flatten(), nn::Linear(features, 128), nn::ReLU(), nn::Linear(128, k)),
                 made);
  }
  return makeVit(vit, made);
}

}  // namespace gyre::train
