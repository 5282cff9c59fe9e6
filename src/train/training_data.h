// What `gyre train` trains on: Fashion-MNIST (its IDX files) or, with --data, an image folder's
// train and test splits, and the model shape that follows from it.
#pragma once

#include <string>
#include <vector>

#include "gyre/torch/data.h"
#include "train/models.h"
#include "train/options.h"

namespace gyre::train {

struct TrainingData {
  gyre::data::Dataset train;
  gyre::data::Dataset test;
  ModelShape shape;                  // the images' channels, height and width, and the classes
  std::vector<std::string> classes;  // --data: the class folders' names (label order)
  std::vector<std::string> skipped;  // --data: the images left out (--skip-bad-records), "FILE: why"
  std::vector<double> mean, std;     // the normalisation, per channel (of pixels in [0, 1])
};

// --augment's stages as gyre::data transforms; a crop pads with black (0 before normalising).
std::vector<gyre::data::Transform> augmentations(const TrainOptions& o, const TrainingData& data);

// DATA/train and DATA/test (or DATA/val): the test split is normalised with the training split's
// mean and standard deviation and must have the same class folders. Throws gyre::Error naming
// what is missing or different (and the file that cannot be read); InvalidArgument when the model
// cannot take the images.
TrainingData loadTrainingData(const TrainOptions& o);

}  // namespace gyre::train
