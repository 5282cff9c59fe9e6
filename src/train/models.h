// The built-in trainer's models, the same as the plain libtorch reference loop's
// (`gyre_train_worker --plain`, the baseline of `gyre bench train`), so their throughput can be
// compared one to one.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "train/vit.h"

namespace gyre::train {

// "mlp": Flatten - Linear(784, 512) - ReLU - Linear(512, 256) - ReLU - Linear(256, 10).
// "cnn": Conv2d(1, 32, 3, padding 1) - ReLU - MaxPool2d(2) - Conv2d(32, 64, 3, padding 1) - ReLU -
//        MaxPool2d(2) - Flatten - Linear(3136, 128) - ReLU - Linear(128, 10).
// "vit": a small Vision Transformer (train/vit.h), shaped by `vit`.
// By default they take [N, 1, 28, 28] images and return [N, 10] logits; the mlp and the cnn take
// any ModelShape (the mlp's first layer has C·H·W inputs, the cnn's first Linear 64·⌊H/4⌋·⌊W/4⌋,
// and the last layer of each `classes` outputs). With syncBn the cnn has a
// gyre::torch::SyncBatchNorm after each Conv2d (before its ReLU); give it the communicator with
// gyre::torch::setSyncBatchNormCommunicator.
std::vector<std::string> modelNames();

// What a model takes and answers: images [N, channels, height, width], logits [N, classes].
struct ModelShape {
  int channels = 1;
  int height = 28;
  int width = 28;
  int classes = 10;
  bool operator==(const ModelShape&) const = default;
};
// "1x28x28 images in 10 classes".
std::string describe(const ModelShape& shape);
// Throws InvalidArgument saying why when model `name` cannot take `shape` (the vit takes only the
// default; the cnn needs images of at least 4x4).
void checkModelShape(const std::string& name, const ModelShape& shape);

// A freshly initialised model (libtorch's default initialisation, drawn from its global
// generator: seed it with torch::manual_seed first for a reproducible start). Throws
// InvalidArgument for a name not in modelNames(). `made` (when given) is called on each child as
// soon as it is made, in order, before the next one is drawn: a worker that holds only some
// layers releases the others there (gyre/torch/deferred.h), so that the whole model never
// exists in one worker while every worker draws the same values.
::torch::nn::Sequential makeModel(const std::string& name, bool syncBn = false, const VitOptions& vit = {},
                                  const ModelShape& shape = {}, const ChildMade& made = {});

}  // namespace gyre::train
