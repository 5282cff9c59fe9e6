#include "train/training_data.h"

#include <filesystem>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

TrainingData loadTrainingData(const TrainOptions& o) {
  TrainingData d;
  if (o.data.empty()) {
    d.train = gyre::data::loadFashionMnist(o.dataDir, "train", {.cache = true});
    d.test = gyre::data::loadFashionMnist(o.dataDir, "t10k", {.cache = true});
    d.mean = {gyre::data::kFashionMnistMean};
    d.std = {gyre::data::kFashionMnistStd};
    checkModelShape(o.model, d.shape);
    return d;
  }
  const std::string testDir = testFolderOf(o.data);
  const std::string trainDir = (fs::path(o.data) / "train").string();
  gyre::data::ImageFolderOptions options;
  options.skipBadRecords = o.skipBadRecords;
  if (const std::optional<std::pair<int, int>> size = parseResize(o.resize)) {
    options.height = size->first;
    options.width = size->second;
  }
  gyre::data::ImageFolder train = gyre::data::loadImageFolder(trainDir, options);
  options.channels = static_cast<int>(train.data.images.size(1));
  options.mean = train.mean;
  options.std = train.std;
  options.skipBadRecords = o.skipBadRecords - static_cast<std::int64_t>(train.skipped.size());
  gyre::data::ImageFolder test = gyre::data::loadImageFolder(testDir, options);
  if (test.classes != train.classes)
    throw Error(testDir + " has the classes " + joined(test.classes) + "; " + trainDir + " has " +
                joined(train.classes) + ": they must be the same folders");
  if (test.data.images.sizes().slice(1) != train.data.images.sizes().slice(1))
    throw Error(testDir + "'s images are " + std::to_string(test.data.images.size(3)) + "x" +
                std::to_string(test.data.images.size(2)) + ", " + trainDir + "'s " +
                std::to_string(train.data.images.size(3)) + "x" + std::to_string(train.data.images.size(2)));
  d.train = train.data;
  d.test = test.data;
  d.shape = {static_cast<int>(train.data.images.size(1)), static_cast<int>(train.data.images.size(2)),
             static_cast<int>(train.data.images.size(3)), static_cast<int>(train.classes.size())};
  d.classes = std::move(train.classes);
  d.skipped = std::move(train.skipped);
  d.skipped.insert(d.skipped.end(), test.skipped.begin(), test.skipped.end());
  d.mean = train.mean;
  d.std = train.std;
  checkModelShape(o.model, d.shape);
  return d;
}

std::vector<gyre::data::Transform> augmentations(const TrainOptions& o, const TrainingData& data) {
  std::vector<gyre::data::Transform> transforms;
  for (const AugmentStage& stage : parseAugment(o.augment)) {
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
