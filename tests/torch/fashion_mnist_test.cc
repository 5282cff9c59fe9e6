// Loading Fashion-MNIST: the package hint when it is missing, clear errors naming the file for
// garbage, truncated and inconsistent files (written to a temporary directory), and the
// installed data set's shape and normalisation when it is there.
#include "train/fashion_mnist.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::train {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::string errorOf(const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// An uncompressed IDX file of unsigned bytes (gzread reads those as they are).
Bytes idx(const std::vector<std::uint32_t>& dims, std::size_t dataBytes, std::uint8_t fill = 0) {
  Bytes out = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<std::uint8_t>(d >> shift));
  out.insert(out.end(), dataBytes, fill);
  return out;
}

// A small split SPLIT in `dir`: n images (pixel i of every image = i % 256) and labels.
void writeSplit(const std::string& dir, const std::string& split, std::uint32_t images, const Bytes& labels) {
  Bytes imageFile = idx({images, 28, 28}, 0);
  for (std::uint32_t i = 0; i < images * 28 * 28; ++i)
    imageFile.push_back(static_cast<std::uint8_t>(i % 784 % 256));
  write(dir + "/" + split + "-images-idx3-ubyte", imageFile);
  Bytes labelFile = idx({static_cast<std::uint32_t>(labels.size())}, 0);
  labelFile.insert(labelFile.end(), labels.begin(), labels.end());
  write(dir + "/" + split + "-labels-idx1-ubyte", labelFile);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FashionMnist, MissingDirectoryNamesThePackage) {
  const std::string message = errorOf([] { loadFashionMnist("/nonexistent/fashion-mnist"); });
  EXPECT_TRUE(contains(message, "Fashion-MNIST not found in /nonexistent/fashion-mnist")) << message;
  EXPECT_TRUE(contains(message, "sudo apt-get install dataset-fashion-mnist")) << message;
  EXPECT_TRUE(contains(message, "--data-dir")) << message;
}

TEST(FashionMnist, MissingFileNamesThePackageAndTheFile) {
  test::TempDir dir;
  const std::string message = errorOf([&] { loadFashionMnist(dir.path()); });
  EXPECT_TRUE(contains(message, "train-images-idx3-ubyte.gz")) << message;
  EXPECT_TRUE(contains(message, "dataset-fashion-mnist")) << message;
}

TEST(FashionMnist, GarbageIsNotAnIdxFile) {
  test::TempDir dir;
  const std::string path = dir.path() + "/garbage";
  const std::string text = "<html>404 Not Found</html>";
  write(path, Bytes(text.begin(), text.end()));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is not an IDX file")) << message;
  EXPECT_TRUE(contains(message, "magic number")) << message;
}

TEST(FashionMnist, ShorterThanItsHeader) {
  test::TempDir dir;
  const std::string path = dir.path() + "/short";
  write(path, {0, 0, 8});
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is not an IDX file")) << message;
}

TEST(FashionMnist, TruncatedDataIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/truncated";
  write(path, idx({60000, 28, 28}, 1000));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is truncated")) << message;
  EXPECT_TRUE(contains(message, "47040000")) << message;
}

TEST(FashionMnist, TrailingBytesAreReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/long";
  write(path, idx({10}, 12));
  const std::string message = errorOf([&] { readIdxFile(path, 1); });
  EXPECT_TRUE(contains(message, path + " has 2 bytes after")) << message;
}

TEST(FashionMnist, DamagedGzipStreamIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/damaged.gz";
  Bytes bytes = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};                         // a gzip header ...
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<std::uint8_t>(i * 37 + 11));  // ... and noise
  write(path, bytes);
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path)) << message;
}

TEST(FashionMnist, WrongRankIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/labels";
  write(path, idx({10}, 10));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, "with 3 dimensions (magic number 0x00000801, expected 0x00000803)"))
      << message;
}

TEST(FashionMnist, SmallSplitLoadsNormalised) {
  test::TempDir dir;
  writeSplit(dir.path(), "t10k", 3, {7, 0, 9});
  const ImageSet set = loadFashionMnistSplit(dir.path(), "t10k");
  ASSERT_EQ(set.size(), 3);
  EXPECT_EQ(set.images.sizes(), (std::vector<std::int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(set.images.scalar_type(), ::torch::kFloat32);
  EXPECT_EQ(set.labels.scalar_type(), ::torch::kInt64);
  EXPECT_EQ(set.labels[0].item<std::int64_t>(), 7);
  EXPECT_EQ(set.labels[2].item<std::int64_t>(), 9);
  const auto flat = set.images.reshape({3, 784});
  EXPECT_NEAR(flat[1][0].item<float>(), (0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_NEAR(flat[1][255].item<float>(), (1 - 0.2860) / 0.3530, 1e-6);
}

TEST(FashionMnist, ImagesAndLabelsMustAgree) {
  test::TempDir dir;
  writeSplit(dir.path(), "train", 3, {1, 2});
  const std::string message = errorOf([&] { loadFashionMnistSplit(dir.path(), "train"); });
  EXPECT_TRUE(contains(message, "holds 3 images but")) << message;
  EXPECT_TRUE(contains(message, "2 labels")) << message;
}

TEST(FashionMnist, LabelsOutOfRangeAreReported) {
  test::TempDir dir;
  writeSplit(dir.path(), "train", 2, {1, 12});
  const std::string message = errorOf([&] { loadFashionMnistSplit(dir.path(), "train"); });
  EXPECT_TRUE(contains(message, "the label 12")) << message;
}

TEST(FashionMnist, InstalledDataSet) {
  if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const FashionMnist data = loadFashionMnist();
  EXPECT_EQ(data.train.size(), 60000);
  EXPECT_EQ(data.test.size(), 10000);
  EXPECT_EQ(data.train.labels.min().item<std::int64_t>(), 0);
  EXPECT_EQ(data.train.labels.max().item<std::int64_t>(), 9);
  // Normalised with the training set's own mean and standard deviation.
  EXPECT_NEAR(data.train.images.mean().item<double>(), 0, 0.01);
  EXPECT_NEAR(data.train.images.std().item<double>(), 1, 0.01);
}

}  // namespace
}  // namespace gyre::train
