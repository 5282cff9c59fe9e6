// gyre::data's files: IDX files plain and gzip-compressed (written here with zlib), errors naming
// the file for garbage, truncated and inconsistent files, MNIST and Fashion-MNIST splits with
// their normalisations and messages, the cache of decoded splits, and the installed data set's
// shape and normalisation when it is there.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "support/ranks.h"

namespace gyre::data {
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

void writeGzip(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// An IDX file of unsigned bytes.
Bytes idx(const std::vector<std::uint32_t>& dims, std::size_t dataBytes, std::uint8_t fill = 0) {
  Bytes out = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<std::uint8_t>(d >> shift));
  out.insert(out.end(), dataBytes, fill);
  return out;
}

// A small split SPLIT in `dir`: `images` images (pixel i of every image = i % 256) and labels,
// gzip-compressed or not.
void writeSplit(const std::string& dir, const std::string& split, std::uint32_t images, const Bytes& labels,
                bool gzip = false) {
  Bytes imageFile = idx({images, 28, 28}, 0);
  for (std::uint32_t i = 0; i < images * 28 * 28; ++i) imageFile.push_back(static_cast<std::uint8_t>(i % 784 % 256));
  Bytes labelFile = idx({static_cast<std::uint32_t>(labels.size())}, 0);
  labelFile.insert(labelFile.end(), labels.begin(), labels.end());
  const std::string base = dir + "/" + split;
  if (gzip) {
    writeGzip(base + "-images-idx3-ubyte.gz", imageFile);
    writeGzip(base + "-labels-idx1-ubyte.gz", labelFile);
  } else {
    write(base + "-images-idx3-ubyte", imageFile);
    write(base + "-labels-idx1-ubyte", labelFile);
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(IdxFile, ReadsPlainAndGzipAlike) {
  test::TempDir dir;
  Bytes file = idx({2, 3}, 0);
  for (std::uint8_t b : {1, 2, 3, 4, 5, 6}) file.push_back(b);
  write(dir.path() + "/plain", file);
  writeGzip(dir.path() + "/packed.gz", file);
  for (const std::string name : {"plain", "packed.gz"}) {
    const IdxArray a = readIdxFile(dir.path() + "/" + name, 2);
    EXPECT_EQ(a.dims, (std::vector<std::int64_t>{2, 3})) << name;
    EXPECT_EQ(a.data, (Bytes{1, 2, 3, 4, 5, 6})) << name;
  }
}

TEST(IdxFile, MissingFileIsNamed) {
  test::TempDir dir;
  const std::string path = dir.path() + "/absent.gz";
  const std::string message = errorOf([&] { readIdxFile(path, 1); });
  EXPECT_TRUE(contains(message, "cannot open " + path)) << message;
}

TEST(IdxFile, GarbageIsNotAnIdxFile) {
  test::TempDir dir;
  const std::string path = dir.path() + "/garbage";
  const std::string text = "<html>404 Not Found</html>";
  write(path, Bytes(text.begin(), text.end()));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is not an IDX file")) << message;
  EXPECT_TRUE(contains(message, "magic number")) << message;
}

TEST(IdxFile, BadMagicInAGzipFileIsNamed) {
  test::TempDir dir;
  const std::string path = dir.path() + "/bad-magic.gz";
  Bytes file = idx({4}, 4);
  file[2] = 0x0D;  // float32 elements: not what the reader takes
  writeGzip(path, file);
  const std::string message = errorOf([&] { readIdxFile(path, 1); });
  EXPECT_TRUE(contains(message, path + " is not an IDX file of unsigned bytes with 1 dimensions")) << message;
  EXPECT_TRUE(contains(message, "magic number 0x00000d01, expected 0x00000801")) << message;
}

TEST(IdxFile, ShorterThanItsHeader) {
  test::TempDir dir;
  const std::string path = dir.path() + "/short";
  write(path, {0, 0, 8});
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is not an IDX file")) << message;
}

TEST(IdxFile, TruncatedDataIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/truncated";
  write(path, idx({60000, 28, 28}, 1000));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path + " is truncated")) << message;
  EXPECT_TRUE(contains(message, "47040000")) << message;
}

TEST(IdxFile, TruncatedGzipFileIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/truncated.gz";
  writeGzip(path, idx({10, 28, 28}, 10 * 28 * 28, 7));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // cut the stream
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path)) << message;
}

TEST(IdxFile, TrailingBytesAreReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/long";
  write(path, idx({10}, 12));
  const std::string message = errorOf([&] { readIdxFile(path, 1); });
  EXPECT_TRUE(contains(message, path + " has 2 bytes after")) << message;
}

TEST(IdxFile, DamagedGzipStreamIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/damaged.gz";
  Bytes bytes = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};                         // a gzip header ...
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<std::uint8_t>(i * 37 + 11));  // ... and noise
  write(path, bytes);
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, path)) << message;
}

TEST(IdxFile, WrongRankIsReported) {
  test::TempDir dir;
  const std::string path = dir.path() + "/labels";
  write(path, idx({10}, 10));
  const std::string message = errorOf([&] { readIdxFile(path, 3); });
  EXPECT_TRUE(contains(message, "with 3 dimensions (magic number 0x00000801, expected 0x00000803)")) << message;
}

TEST(FashionMnist, MissingDirectoryNamesThePackage) {
  const std::string message = errorOf([] { loadFashionMnist("/nonexistent/fashion-mnist", "train"); });
  EXPECT_TRUE(contains(message, "Fashion-MNIST not found in /nonexistent/fashion-mnist")) << message;
  EXPECT_TRUE(contains(message, "sudo apt-get install dataset-fashion-mnist")) << message;
  EXPECT_TRUE(contains(message, "--data-dir")) << message;
}

TEST(FashionMnist, MissingFileNamesThePackageAndTheFile) {
  test::TempDir dir;
  const std::string message = errorOf([&] { loadFashionMnist(dir.path(), "train"); });
  EXPECT_TRUE(contains(message, "train-images-idx3-ubyte.gz")) << message;
  EXPECT_TRUE(contains(message, "dataset-fashion-mnist")) << message;
}

TEST(FashionMnist, SmallSplitLoadsNormalised) {
  test::TempDir dir;
  writeSplit(dir.path(), "t10k", 3, {7, 0, 9});
  const Dataset set = loadFashionMnist(dir.path(), "t10k");
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

TEST(FashionMnist, GzipAndPlainSplitsLoadTheSame) {
  test::TempDir plain;
  test::TempDir packed;
  writeSplit(plain.path(), "train", 4, {1, 2, 3, 4});
  writeSplit(packed.path(), "train", 4, {1, 2, 3, 4}, true);
  const Dataset a = loadFashionMnist(plain.path(), "train");
  const Dataset b = loadFashionMnist(packed.path(), "train");
  EXPECT_TRUE(a.images.equal(b.images));
  EXPECT_TRUE(a.labels.equal(b.labels));
}

TEST(FashionMnist, ImagesAndLabelsMustAgree) {
  test::TempDir dir;
  writeSplit(dir.path(), "train", 3, {1, 2});
  const std::string message = errorOf([&] { loadFashionMnist(dir.path(), "train"); });
  EXPECT_TRUE(contains(message, "holds 3 images but")) << message;
  EXPECT_TRUE(contains(message, "2 labels")) << message;
}

TEST(FashionMnist, LabelsOutOfRangeAreReported) {
  test::TempDir dir;
  writeSplit(dir.path(), "train", 2, {1, 12});
  const std::string message = errorOf([&] { loadFashionMnist(dir.path(), "train"); });
  EXPECT_TRUE(contains(message, "the label 12")) << message;
}

TEST(FashionMnist, InstalledDataSet) {
  if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const Dataset train = loadFashionMnist("", "train");
  const Dataset test = loadFashionMnist("", "t10k");
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.labels.min().item<std::int64_t>(), 0);
  EXPECT_EQ(train.labels.max().item<std::int64_t>(), 9);
  // Normalised with the training set's own mean and standard deviation.
  EXPECT_NEAR(train.images.mean().item<double>(), 0, 0.01);
  EXPECT_NEAR(train.images.std().item<double>(), 1, 0.01);
}

TEST(Mnist, NormalisesWithItsOwnFigures) {
  test::TempDir dir;
  writeSplit(dir.path(), "train", 2, {3, 5}, true);
  const Dataset set = loadMnist(dir.path(), "train");
  const auto flat = set.images.reshape({2, 784});
  EXPECT_NEAR(flat[0][0].item<float>(), (0 - 0.1307) / 0.3081, 1e-6);
  EXPECT_NEAR(flat[0][255].item<float>(), (1 - 0.1307) / 0.3081, 1e-6);
  EXPECT_EQ(set.labels[1].item<std::int64_t>(), 5);
}

TEST(Mnist, NeedsADirectoryAndNamesNoPackage) {
  EXPECT_THROW(loadMnist("", "train"), InvalidArgument);
  const std::string message = errorOf([] { loadMnist("/nonexistent/mnist", "t10k"); });
  EXPECT_TRUE(contains(message, "MNIST not found in /nonexistent/mnist")) << message;
  EXPECT_FALSE(contains(message, "dataset-fashion-mnist")) << message;
}

TEST(Cache, SecondLoadReturnsTheSameTensorsWithoutDecoding) {
  clearCache();
  test::TempDir dir;
  writeSplit(dir.path(), "train", 3, {1, 2, 3}, true);
  const Dataset first = loadFashionMnist(dir.path(), "train", {.cache = true});
  // Through another spelling of the same directory: the key is the canonical path.
  const Dataset second = loadFashionMnist(dir.path() + "/.", "train", {.cache = true});
  EXPECT_EQ(first.images.data_ptr(), second.images.data_ptr());
  EXPECT_EQ(first.labels.data_ptr(), second.labels.data_ptr());
  // Without the cache: decoded again, equal values in new memory.
  const Dataset fresh = loadFashionMnist(dir.path(), "train");
  EXPECT_NE(fresh.images.data_ptr(), first.images.data_ptr());
  EXPECT_TRUE(fresh.images.equal(first.images));
  // Another normalisation of the same files is another entry.
  const Dataset digits = loadMnist(dir.path(), "train", {.cache = true});
  EXPECT_NE(digits.images.data_ptr(), first.images.data_ptr());
  EXPECT_FALSE(digits.images.equal(first.images));
  EXPECT_EQ(clearCache(), 2u);
  const Dataset after = loadFashionMnist(dir.path(), "train", {.cache = true});
  EXPECT_NE(after.images.data_ptr(), first.images.data_ptr());  // decoded again
  EXPECT_EQ(clearCache(), 1u);
}

TEST(Cache, ReplacedFilesAreDecodedAgain) {
  clearCache();
  test::TempDir dir;
  writeSplit(dir.path(), "train", 2, {1, 2});
  const Dataset before = loadFashionMnist(dir.path(), "train", {.cache = true});
  writeSplit(dir.path(), "train", 3, {4, 5, 6});  // another size: another key
  const Dataset after = loadFashionMnist(dir.path(), "train", {.cache = true});
  EXPECT_EQ(before.size(), 2);
  EXPECT_EQ(after.size(), 3);
  clearCache();
}

}  // namespace
}  // namespace gyre::data
