// What `gyre train` trains on: Fashion-MNIST (its IDX files) or, with --data, a data set's train
// and test splits (image folders, tables or record shards), and the model shape that follows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gyre/torch/data.h"
#include "train/models.h"
#include "train/options.h"

namespace gyre::train {

struct TrainingData {
  // The training split, read batch by batch: in memory, or record shards decoded as they are read.
  std::shared_ptr<const gyre::data::Source> train;
  gyre::data::Dataset test;  // in memory
  ModelShape shape;                  // the samples' channels, height and width (features: 1 x 1 x F), and the classes
  std::vector<std::string> classes;  // --data: the classes' names (label order)
  std::vector<std::string> skipped;  // --data: the samples left out while loading (--skip-bad-records), "WHERE: why"
  std::vector<double> mean, std;     // the normalisation, per channel (of pixels in [0, 1]) or feature
  bool images = true;                // false: --data holds features (tables), which --augment cannot touch
};

// --augment's stages as gyre::data transforms; a crop pads with black (0 before normalising).
// Throws InvalidArgument when the data are not images.
std::vector<gyre::data::Transform> augmentations(const TrainOptions& o, const TrainingData& data);

// Fashion-MNIST, or --data's splits: the test split is normalised with the training split's
// figures and must have the same classes. Throws gyre::Error naming what is missing or different
// (and the file, line or record that cannot be read); InvalidArgument when the model cannot take
// the samples.
TrainingData loadTrainingData(const TrainOptions& o);

}  // namespace gyre::train
