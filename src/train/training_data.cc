#include "train/training_data.h"

#include "common/check.h"
#include "data/data_root.h"
#include "data/records.h"
#include "gyre/errors.h"
#include "gyre/torch/data_files.h"

namespace gyre::train {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

void checkSameClasses(const std::vector<std::string>& test, const std::vector<std::string>& train,
                      const std::string& testName, const std::string& trainName) {
  if (test != train)
    throw Error(testName + " has the classes " + joined(test) + "; " + trainName + " has " + joined(train) +
                ": they must be the same");
}

ModelShape shapeOf(const std::vector<std::int64_t>& sample, std::size_t classes) {
  const int n = static_cast<int>(sample.size());
  return {n == 3 ? static_cast<int>(sample[0]) : 1, n == 3 ? static_cast<int>(sample[1]) : 1,
          static_cast<int>(sample[static_cast<std::size_t>(n - 1)]), static_cast<int>(classes)};
}

// Both splits loaded whole (an ImageFolder or a Table each): the samples' shape is the training
// split's, the skips are both splits'.
template <typename Split>
TrainingData wholeSplits(Split train, const Split& test) {
  TrainingData d;
  d.shape = shapeOf(train.data.images.sizes().slice(1).vec(), train.classes.size());
  d.train = gyre::data::inMemory(train.data);
  d.test = test.data;
  d.classes = std::move(train.classes);
  d.skipped = std::move(train.skipped);
  d.skipped.insert(d.skipped.end(), test.skipped.begin(), test.skipped.end());
  d.mean = std::move(train.mean);
  d.std = std::move(train.std);
  return d;
}

TrainingData imageFolders(const TrainOptions& o, const gyre::data::detail::DataRoot& root) {
  gyre::data::ImageFolderOptions options;
  options.skipBadRecords = o.skipBadRecords;
  if (const std::optional<std::pair<int, int>> size = parseResize(o.resize)) {
    options.height = size->first;
    options.width = size->second;
  }
  gyre::data::ImageFolder train = gyre::data::loadImageFolder(root.train, options);
  options.channels = static_cast<int>(train.data.images.size(1));
  options.mean = train.mean;
  options.std = train.std;
  options.skipBadRecords = o.skipBadRecords - static_cast<std::int64_t>(train.skipped.size());
  gyre::data::ImageFolder test = gyre::data::loadImageFolder(root.test, options);
  checkSameClasses(test.classes, train.classes, root.test, root.train);
  if (test.data.images.sizes().slice(1) != train.data.images.sizes().slice(1))
    throw Error(root.test + "'s images are " + std::to_string(test.data.images.size(3)) + "x" +
                std::to_string(test.data.images.size(2)) + ", " + root.train + "'s " +
                std::to_string(train.data.images.size(3)) + "x" + std::to_string(train.data.images.size(2)));
  return wholeSplits(std::move(train), test);
}

TrainingData tables(const TrainOptions& o, const gyre::data::detail::DataRoot& root) {
  GYRE_USAGE_CHECK(o.resize.empty(), "--resize needs images; --data ", o.data, " holds tables");
  gyre::data::TableOptions options;
  options.labelColumn = o.labelColumn;
  options.skipBadRecords = o.skipBadRecords;
  gyre::data::Table train = gyre::data::loadTable(root.train, options);
  options.classes = train.classes;
  options.mean = train.mean;
  options.std = train.std;
  options.skipBadRecords = o.skipBadRecords - static_cast<std::int64_t>(train.skipped.size());
  gyre::data::Table test = gyre::data::loadTable(root.test, options);
  if (test.columns != train.columns)
    throw Error(root.test + " has the columns " + joined(test.columns) + "; " + root.train + " has " +
                joined(train.columns) + ": they must be the same, in the same order");
  TrainingData d = wholeSplits(std::move(train), test);
  d.images = false;
  return d;
}

TrainingData records(const TrainOptions& o) {
  TrainingData d;
  gyre::data::RecordSetOptions options;
  options.skipBadRecords = o.skipBadRecords;
  if (const std::optional<std::pair<int, int>> size = parseResize(o.resize)) {
    options.height = size->first;
    options.width = size->second;
  }
  auto train = std::make_shared<gyre::data::RecordSet>(o.data, options);
  // The test split: "test", or "val" when it was packed from a val folder.
  options.split = gyre::data::detail::readRecordManifest(o.data).splits.count("val") > 0 ? "val" : "test";
  const gyre::data::RecordSet test(o.data, options);
  d.test = test.load();
  d.skipped = test.skipped();
  d.shape = shapeOf(train->sampleShape(), train->classes().size());
  d.classes = train->classes();
  d.mean = train->mean();
  d.std = train->std();
  d.images = train->images();
  d.train = std::move(train);
  return d;
}

}  // namespace

TrainingData loadTrainingData(const TrainOptions& o) {
  TrainingData d;
  if (o.data.empty()) {
    d.train = gyre::data::inMemory(gyre::data::loadFashionMnist(o.dataDir, "train", {.cache = true}));
    d.test = gyre::data::loadFashionMnist(o.dataDir, "t10k", {.cache = true});
    d.mean = {gyre::data::kFashionMnistMean};
    d.std = {gyre::data::kFashionMnistStd};
  } else {
    const gyre::data::detail::DataRoot root = gyre::data::detail::describeDataRoot(o.data);
    switch (root.kind) {
      case gyre::data::detail::DataKind::kImageFolders: d = imageFolders(o, root); break;
      case gyre::data::detail::DataKind::kTables: d = tables(o, root); break;
      case gyre::data::detail::DataKind::kRecords: d = records(o); break;
    }
  }
  checkModelShape(o.model, d.shape);
  return d;
}

std::vector<gyre::data::Transform> augmentations(const TrainOptions& o, const TrainingData& data) {
  std::vector<gyre::data::Transform> transforms;
  const std::vector<AugmentStage> stages = parseAugment(o.augment);
  GYRE_USAGE_CHECK(stages.empty() || data.images, "--augment needs images; --data ", o.data, " holds features");
  for (const AugmentStage& stage : stages) {
    if (stage.name == "flip") {
      transforms.push_back(gyre::data::randomHorizontalFlip(0.5));
    } else {
      // Black in the first channel's normalised units (the padding torchvision adds before Normalize).
      transforms.push_back(gyre::data::randomCrop(stage.padding, -data.mean.at(0) / data.std.at(0)));
    }
  }
  return transforms;
}

}  // namespace gyre::train
