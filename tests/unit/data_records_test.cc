// Record shards (src/data/records.h) and gyre data pack (src/data/pack.h): records come back as
// written across shards; a damaged, truncated or miscounted shard is named with its record; a
// shard deleted while open still reads; packing image folders and tables writes the manifest
// last, refuses a non-empty destination and leaves nothing behind when it fails.
#include "data/records.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/pack.h"
#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::data::detail {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

std::string recordError(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Bytes sampleOf(int i) { return Bytes(static_cast<std::size_t>(10 + i % 7), static_cast<std::uint8_t>(i)); }

void writeGrayPng(const std::string& path, int width, int height, std::uint8_t seed) {
  Bytes pixels(static_cast<std::size_t>(width * height));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(seed * 37 + i * 11);
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_GRAY;
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr), 0) << image.message;
}

class RecordsTest : public ::testing::Test {
 protected:
  std::string at(const std::string& name) const { return dir_.path() + "/" + name; }
  // 40 records of 10-16 bytes in shards of about 100 bytes.
  RecordSplit writeSplit(const std::string& dir) const {
    fs::create_directories(dir);
    RecordWriter w(dir, "train", 100);
    for (int i = 0; i < 40; ++i) w.add(i % 3, sampleOf(i).data(), sampleOf(i).size());
    return w.finish();
  }
  test::TempDir dir_;
};

TEST_F(RecordsTest, RecordsComeBackAsWrittenAcrossShards) {
  const RecordSplit split = writeSplit(at("set"));
  EXPECT_EQ(split.records, 40);
  ASSERT_GT(split.shards.size(), 3u);
  std::int64_t total = 0;
  for (const RecordShard& s : split.shards) {
    total += s.records;
    EXPECT_EQ(static_cast<std::int64_t>(fs::file_size(at("set/" + s.file))), s.bytes);
  }
  EXPECT_EQ(total, 40);
  EXPECT_EQ(split.shards[0].file, "train-00000.gyrec");
  const RecordReader reader(at("set"), "train", split);
  ASSERT_EQ(reader.size(), 40);
  for (int i : {39, 0, 17, 5}) {
    std::int64_t label = -1;
    Bytes sample;
    EXPECT_EQ(reader.read(i, label, sample), "");
    EXPECT_EQ(label, i % 3);
    EXPECT_EQ(sample, sampleOf(i));
  }
  EXPECT_EQ(reader.where(0), at("set/train-00000.gyrec") + ", record 0");
}

TEST_F(RecordsTest, DamagedTruncatedAndMiscountedShardsAreNamed) {
  RecordSplit split = writeSplit(at("set"));
  const std::string first = at("set/" + split.shards[0].file);
  {  // one byte of record 1's sample flipped
    std::fstream f(first, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8 + 8 + 8 + static_cast<std::streamoff>(sampleOf(0).size()) + 8 + 8 + 2);
    f.put('\x7f');
  }
  {  // record 2's length field: past the end of the shard
    std::fstream f(first, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8 + 2 * 8 + 2 * 8 + static_cast<std::streamoff>(sampleOf(0).size() + sampleOf(1).size()));
    f.write("\xf0\xff\xff\xff", 4);
  }
  const RecordReader reader(at("set"), "train", split);
  std::int64_t label = 0;
  Bytes sample;
  EXPECT_EQ(reader.read(0, label, sample), "");
  EXPECT_EQ(reader.read(1, label, sample), "fails its CRC check (damaged)");
  EXPECT_EQ(reader.read(2, label, sample), "has a record longer than its shard (damaged)");

  // Truncated after it was opened: the records past the end cannot be read, the others can.
  const std::string last = at("set/" + split.shards.back().file);
  fs::resize_file(last, 8 + 12);
  EXPECT_EQ(reader.read(39, label, sample), "ends early (truncated?)");
  EXPECT_EQ(reader.read(0, label, sample), "");
  // ...and opened again: named at once.
  EXPECT_EQ(recordError([&] { RecordReader again(at("set"), "train", split); }),
            last + " is too short to be a record shard");
  fs::resize_file(last, 40);
  EXPECT_EQ(recordError([&] { RecordReader again(at("set"), "train", split); }),
            last + " has no record index at its end (not a record shard, or truncated)");

  split = writeSplit(at("other"));
  RecordSplit wrong = split;
  wrong.shards[0].records += 1;
  EXPECT_EQ(recordError([&] { RecordReader r(at("other"), "train", wrong); }),
            at("other/train-00000.gyrec") + " holds " + std::to_string(split.shards[0].records) +
                " records where index.json says " + std::to_string(wrong.shards[0].records));
  fs::remove(at("other/" + split.shards[1].file));
  EXPECT_EQ(recordError([&] { RecordReader r(at("other"), "train", split); }),
            at("other/train-00001.gyrec") + " (a shard of split train) cannot be opened (No such file or directory)");
}

TEST_F(RecordsTest, AShardDeletedWhileOpenStillReads) {
  const RecordSplit split = writeSplit(at("set"));
  const RecordReader reader(at("set"), "train", split);
  for (const RecordShard& s : split.shards) fs::remove(at("set/" + s.file));
  std::int64_t label = 0;
  Bytes sample;
  EXPECT_EQ(reader.read(33, label, sample), "");
  EXPECT_EQ(sample, sampleOf(33));
}

TEST_F(RecordsTest, ManifestsRoundTripAndBadOnesAreNamed) {
  RecordManifest m;
  m.kind = "features";
  m.classes = {"a", "b"};
  m.features = {"x", "y"};
  m.mean = {0.5, 1};
  m.std = {2, 3};
  m.splits["train"] = {3, {{"train-00000.gyrec", 3, 99}}};
  fs::create_directories(at("m"));
  writeRecordManifest(at("m"), m);
  EXPECT_FALSE(fs::exists(at("m/index.json.partial")));
  const RecordManifest back = readRecordManifest(at("m"));
  EXPECT_EQ(back.classes, m.classes);
  EXPECT_EQ(back.features, m.features);
  EXPECT_EQ(back.std, m.std);
  EXPECT_EQ(back.splits.at("train").shards.at(0).bytes, 99);

  std::ofstream(at("m/index.json")) << "{\"format\": \"gyre-records\", \"version\": 2}";
  EXPECT_EQ(recordError([&] { readRecordManifest(at("m")); }),
            at("m/index.json") + " is version 2 of the record format; this gyre reads 1");
  std::ofstream(at("m/index.json")) << "{\"format\": \"gyre-records\", \"version\": 1, \"kind\": \"images\"}";
  EXPECT_NE(recordError([&] { readRecordManifest(at("m")); }).find(at("m/index.json") + " is not a valid record manifest"),
            std::string::npos);
  EXPECT_EQ(recordError([&] { readRecordManifest(at("none")); }),
            at("none/index.json") + " cannot be opened (No such file or directory): not a packed data set (gyre data pack)");
}

TEST_F(RecordsTest, PackingImageFoldersChecksEveryImage) {
  for (const char* split : {"train", "test"})
    for (const char* c : {"ant", "bee"}) {
      fs::create_directories(at(std::string("src/") + split + "/" + c));
      for (int i = 0; i < 3; ++i)
        writeGrayPng(at(std::string("src/") + split + "/" + c + "/" + std::to_string(i) + ".png"), 5, 4,
                     static_cast<std::uint8_t>(i + (c[0] == 'b' ? 10 : 0)));
    }
  const RecordManifest m = packDataSet(at("src"), at("out"), {.shardBytes = 200});
  EXPECT_EQ(m.kind, "images");
  EXPECT_EQ(m.classes, (std::vector<std::string>{"ant", "bee"}));
  EXPECT_EQ(m.channels, 1);
  EXPECT_EQ(m.width, 5);
  EXPECT_EQ(m.height, 4);
  ASSERT_EQ(m.mean.size(), 1u);
  EXPECT_GT(m.std.at(0), 0);
  EXPECT_EQ(m.splits.at("train").records, 6);
  EXPECT_EQ(m.splits.at("test").records, 6);
  EXPECT_GT(m.splits.at("train").shards.size(), 1u);
  // A record holds the file's own bytes and its class.
  const RecordReader reader(at("out"), "train", readRecordManifest(at("out")).splits.at("train"));
  std::int64_t label = 0;
  Bytes sample;
  ASSERT_EQ(reader.read(4, label, sample), "");
  EXPECT_EQ(label, 1);
  std::ifstream in(at("src/train/bee/1.png"), std::ios::binary);
  EXPECT_EQ(sample, Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));

  // A non-empty destination is refused; a corrupt image stops the pack and leaves no shard.
  EXPECT_EQ(recordError([&] { packDataSet(at("src"), at("out"), {}); }),
            at("out") + " exists and is not an empty folder: gyre data pack writes into a new (or empty) one");
  fs::resize_file(at("src/test/bee/2.png"), 30);
  EXPECT_NE(recordError([&] { packDataSet(at("src"), at("bad"), {}); }).find(at("src/test/bee/2.png") + ": "),
            std::string::npos);
  EXPECT_FALSE(fs::exists(at("bad")));
  // ...unless it may be skipped: then it is listed.
  const RecordManifest skipped = packDataSet(at("src"), at("skip"), {.skipBadRecords = 1});
  EXPECT_EQ(skipped.splits.at("test").records, 5);
  ASSERT_EQ(skipped.skipped.size(), 1u);
  EXPECT_EQ(skipped.skipped[0].rfind(at("src/test/bee/2.png") + ": ", 0), 0u) << skipped.skipped[0];
}

TEST_F(RecordsTest, PackingTablesStoresFeaturesAndTheirFigures) {
  fs::create_directories(at("tab"));
  std::ofstream(at("tab/train.csv")) << "x,y,label\n1,10,b\n3,10,a\n";
  std::ofstream(at("tab/val.csv")) << "x,y,label\n2,5,a\n";
  const RecordManifest m = packDataSet(at("tab"), at("out"), {});
  EXPECT_EQ(m.kind, "features");
  EXPECT_EQ(m.features, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(m.classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.mean, (std::vector<double>{2, 10}));
  EXPECT_EQ(m.std, (std::vector<double>{1, 1}));  // y is constant: centred, not scaled
  EXPECT_EQ(m.splits.at("val").records, 1);
  const RecordReader reader(at("out"), "train", m.splits.at("train"));
  std::int64_t label = -1;
  Bytes sample;
  ASSERT_EQ(reader.read(0, label, sample), "");
  EXPECT_EQ(label, 1);  // "b"
  ASSERT_EQ(sample.size(), 8u);
  float values[2];
  std::memcpy(values, sample.data(), 8);
  EXPECT_EQ(values[0], 1.0F);
  EXPECT_EQ(values[1], 10.0F);
  EXPECT_EQ(recordError([&] { packDataSet(at("out"), at("again"), {}); }),
            at("out") + " is already packed (it holds index.json)");
}

}  // namespace
}  // namespace gyre::data::detail
