// gyre::data's tables and record shards as tensors: loadTable's standardisation and classes, a
// RecordSet's batches equal to the image folder it was packed from, a damaged record skipped
// (listed once, however often it is met) or named, and a Loader over a RecordSet the same on any
// number of threads.
#include <gtest/gtest.h>
#include <png.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/pack.h"
#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "gyre/torch/data_files.h"
#include "support/ranks.h"

namespace gyre::data {
namespace {

namespace fs = std::filesystem;

std::string errorFrom(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void writeTestPng(const std::string& path, int width, int height, int seed) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width * height));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(seed * 29 + i * 13);
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_GRAY;
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr), 0) << image.message;
}

class DataFilesTest : public ::testing::Test {
 protected:
  std::string at(const std::string& name) const { return dir_.path() + "/" + name; }
  // SRC/{train,test}/{c0,c1,c2}/*.png, 6x5 grayscale, packed into small shards at PACKED.
  void packImages() {
    for (const char* split : {"train", "test"})
      for (int c = 0; c < 3; ++c) {
        const std::string folder = at(std::string("src/") + split + "/c" + std::to_string(c));
        fs::create_directories(folder);
        for (int i = 0; i < 7; ++i) writeTestPng(folder + "/" + std::to_string(i) + ".png", 6, 5, c * 10 + i);
      }
    detail::packDataSet(at("src"), at("packed"), {.shardBytes = 300});
  }
  test::TempDir dir_;
};

TEST_F(DataFilesTest, TablesAreStandardisedWithTheTrainingSplitsFigures) {
  std::ofstream(at("train.csv")) << "x,y,label\n1,7,b\n3,7,a\n5,7,b\n";
  std::ofstream(at("test.jsonl")) << "{\"x\": 3, \"y\": 8, \"label\": \"a\"}\n";
  const Table train = loadTable(at("train.csv"));
  EXPECT_EQ(train.classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(train.columns, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(train.mean.size(), 2u);
  EXPECT_DOUBLE_EQ(train.mean[0], 3);
  EXPECT_DOUBLE_EQ(train.std[1], 1);  // constant: centred only
  EXPECT_TRUE(train.data.labels.equal(::torch::tensor({1, 0, 1}, ::torch::kInt64)));
  const double sd = std::sqrt(8.0 / 3.0);
  EXPECT_TRUE(::torch::allclose(train.data.images.select(1, 0),
                                ::torch::tensor({-2 / sd, 0.0, 2 / sd}, ::torch::kFloat32)));
  const Table test = loadTable(at("test.jsonl"), {.classes = train.classes, .mean = train.mean, .std = train.std});
  EXPECT_TRUE(test.data.images.equal(::torch::tensor({{0.0F, 1.0F}})));
  EXPECT_EQ(errorFrom([&] { loadTable(at("test.jsonl"), {.classes = {"b"}}); }),
            at("test.jsonl") + ":1: label 'a' is not one of the 1 classes of the training split");
  const Table raw = loadTable(at("train.csv"), {.standardize = false});
  EXPECT_TRUE(raw.data.images.equal(::torch::tensor({{1.0F, 7.0F}, {3.0F, 7.0F}, {5.0F, 7.0F}})));
}

TEST_F(DataFilesTest, ARecordSetsBatchesAreTheImageFoldersOwn) {
  packImages();
  const RecordSet records(at("packed"));
  ASSERT_EQ(records.size(), 21);
  EXPECT_TRUE(records.images());
  EXPECT_EQ(records.sampleShape(), (std::vector<std::int64_t>{1, 5, 6}));
  EXPECT_EQ(records.classes(), (std::vector<std::string>{"c0", "c1", "c2"}));
  const ImageFolder folder =
      loadImageFolder(at("src/train"), {.threads = 1, .mean = records.mean(), .std = records.std()});
  const std::vector<std::int64_t> indices = {20, 3, 3, 11, 0};
  const Batch batch = records.gather(indices, 4);
  const Batch expected = gatherBatch(folder.data, indices, 4);
  EXPECT_EQ(batch.index, 4);
  EXPECT_TRUE(batch.images.equal(expected.images));
  EXPECT_TRUE(batch.labels.equal(expected.labels));
  // The figures are the training split's, as the folder's own.
  const ImageFolder own = loadImageFolder(at("src/train"), {.threads = 1});
  EXPECT_EQ(records.mean(), own.mean);
  EXPECT_EQ(records.std(), own.std);
  // The whole split in memory; the test split normalised with the training split's figures.
  EXPECT_TRUE(records.load(2).images.equal(folder.data.images));
  const RecordSet test(at("packed"), {.split = "test"});
  const ImageFolder testFolder =
      loadImageFolder(at("src/test"), {.threads = 1, .mean = records.mean(), .std = records.std()});
  EXPECT_TRUE(test.load().images.equal(testFolder.data.images));
  // Resized as the folder would be.
  const RecordSet resized(at("packed"), {.height = 8, .width = 9});
  const ImageFolder folder8x9 = loadImageFolder(
      at("src/train"), {.threads = 1, .height = 8, .width = 9, .mean = records.mean(), .std = records.std()});
  EXPECT_TRUE(resized.gather({2, 19}, 0).images.equal(gatherBatch(folder8x9.data, {2, 19}, 0).images));
  EXPECT_EQ(errorFrom([&] { RecordSet none(at("packed"), {.split = "val"}); }),
            at("packed") + " has no split 'val' (it has test, train)");
}

TEST_F(DataFilesTest, ADamagedRecordIsSkippedOnceOrNamed) {
  packImages();
  // Damage the last byte of the first record's payload (its PNG's end) in the first shard.
  const std::string shard = at("packed/train-00000.gyrec");
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(8);
    unsigned char head[4];
    f.read(reinterpret_cast<char*>(head), 4);
    const std::streamoff length = head[0] | head[1] << 8 | head[2] << 16 | head[3] << 24;
    f.seekp(8 + 8 + length - 1);
    f.put('\x55');
  }
  const RecordSet strict(at("packed"));
  EXPECT_EQ(errorFrom([&] { strict.gather({1, 0}, 0); }), shard + ", record 0: fails its CRC check (damaged)");
  EXPECT_EQ(strict.gather({1, 2}, 0).size(), 2);

  const RecordSet lenient(at("packed"), {.skipBadRecords = 1});
  const Batch batch = lenient.gather({1, 0, 2}, 0);
  EXPECT_EQ(batch.size(), 2);
  EXPECT_TRUE(batch.images.equal(lenient.gather({1, 2}, 0).images));
  lenient.gather({0, 5}, 1);  // met again in a later epoch: still one
  EXPECT_EQ(lenient.skipped(), (std::vector<std::string>{shard + ", record 0: fails its CRC check (damaged)"}));
  EXPECT_EQ(lenient.load().size(), 20);  // the whole split but the damaged record
}

TEST_F(DataFilesTest, ALoaderOverARecordSetIsTheSameOnAnyNumberOfThreads) {
  packImages();
  auto records = std::make_shared<RecordSet>(at("packed"));
  DistributedBatchSampler sampler(records->size(), 1, 0, 4, {.seed = 3});
  std::vector<::torch::Tensor> inline_, threaded;
  for (int workers : {0, 3}) {
    Loader loader(records, sampler.batches(), {.workers = workers});
    while (Batch b = loader.next()) (workers == 0 ? inline_ : threaded).push_back(b.images);
  }
  ASSERT_EQ(inline_.size(), 5u);
  ASSERT_EQ(threaded.size(), inline_.size());
  for (std::size_t i = 0; i < inline_.size(); ++i) EXPECT_TRUE(inline_[i].equal(threaded[i])) << i;
}

}  // namespace
}  // namespace gyre::data
