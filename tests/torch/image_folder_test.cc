// gyre::data::loadImageFolder: PNG and JPEG folders written here with libpng and libjpeg, the
// classes' and files' order, grayscale and colour, the normalisation, every bad input naming the
// file or folder (and --skip-bad-records' counted skips); and, with Debian's Fashion-MNIST, the
// export script's PNGs loading to exactly the IDX files' tensors.
#include <gtest/gtest.h>
#include <png.h>

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

std::string loadError(const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// An 8-bit PNG of `channels` (1 or 3) interleaved channels.
void writePng(const std::string& path, int width, int height, int channels, const Bytes& pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr), 0) << image.message;
}

void writeJpeg(const std::string& path, int width, int height, const Bytes& gray) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  jpeg_compress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  jpeg_stdio_dest(&info, f);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = 1;
  info.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, 100, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPLE*>(gray.data() + static_cast<std::size_t>(info.next_scanline) * width);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::fclose(f);
}

Bytes pattern(int count, int seed) {
  Bytes b(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((i * 7 + seed * 31) % 256);
  return b;
}

void truncate(const std::string& path, std::uintmax_t keep) {
  fs::resize_file(path, keep);
}

class ImageFolderTest : public ::testing::Test {
 protected:
  std::string at(const std::string& name) const { return dir_.path() + "/" + name; }
  // ROOT/a/{0,1}.png and ROOT/b/0.png, 4x3 grayscale.
  std::string smallSet() {
    for (const char* c : {"a", "b"}) fs::create_directories(at(std::string("set/") + c));
    writePng(at("set/b/0.png"), 4, 3, 1, pattern(12, 2));
    writePng(at("set/a/1.png"), 4, 3, 1, pattern(12, 1));
    writePng(at("set/a/0.png"), 4, 3, 1, pattern(12, 0));
    std::ofstream(at("set/a/notes.txt")) << "not an image, ignored";
    return at("set");
  }
  test::TempDir dir_;
};

TEST_F(ImageFolderTest, ListsClassesAndFilesInNameOrderAndNormalises) {
  const ImageFolder set = loadImageFolder(smallSet(), {.threads = 2, .mean = {0.5}, .std = {0.25}});
  EXPECT_EQ(set.classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(set.files, (std::vector<std::string>{at("set/a/0.png"), at("set/a/1.png"), at("set/b/0.png")}));
  ASSERT_EQ(set.data.images.sizes(), (std::vector<std::int64_t>{3, 1, 3, 4}));
  EXPECT_TRUE(set.data.labels.equal(::torch::tensor({0, 0, 1}, ::torch::kInt64)));
  for (int i = 0; i < 3; ++i) {
    const Bytes raw = pattern(12, i);
    const ::torch::Tensor want = ::torch::tensor(std::vector<float>(raw.begin(), raw.end()))
                                     .div(255)
                                     .sub(0.5)
                                     .div(0.25)
                                     .reshape({1, 3, 4});
    EXPECT_TRUE(set.data.images[i].equal(want)) << "image " << i;
  }
  EXPECT_TRUE(set.skipped.empty());
}

TEST_F(ImageFolderTest, TheSetsOwnMeanAndStdByDefault) {
  const ImageFolder set = loadImageFolder(smallSet());
  ASSERT_EQ(set.mean.size(), 1u);
  EXPECT_NEAR(set.data.images.mean().item<double>(), 0.0, 1e-5);
  EXPECT_NEAR(set.data.images.to(::torch::kFloat64).std(false).item<double>(), 1.0, 1e-5);
}

TEST_F(ImageFolderTest, ColourAndJpegImages) {
  fs::create_directories(at("rgb/x"));
  Bytes rgb = pattern(2 * 2 * 3, 5);
  writePng(at("rgb/x/0.png"), 2, 2, 3, rgb);
  const ImageFolder colour = loadImageFolder(at("rgb"), {.mean = {0, 0, 0}, .std = {1, 1, 1}});
  ASSERT_EQ(colour.data.images.sizes(), (std::vector<std::int64_t>{1, 3, 2, 2}));
  // Channel-planar: the green plane holds every pixel's second value.
  EXPECT_FLOAT_EQ(colour.data.images[0][1][0][1].item<float>(), static_cast<float>(rgb[1 * 3 + 1]) / 255);
  // Converted to one channel when asked.
  EXPECT_EQ(loadImageFolder(at("rgb"), {.channels = 1, .mean = {0}, .std = {1}}).data.images.size(1), 1);

  fs::create_directories(at("jpeg/y"));
  const Bytes flat(64, 200);  // a flat image survives JPEG exactly at quality 100
  writeJpeg(at("jpeg/y/0.JPG"), 8, 8, flat);
  const ImageFolder jpeg = loadImageFolder(at("jpeg"), {.mean = {0}, .std = {1}});
  ASSERT_EQ(jpeg.data.images.sizes(), (std::vector<std::int64_t>{1, 1, 8, 8}));
  EXPECT_NEAR(jpeg.data.images.max().item<float>() * 255, 200, 1);
  EXPECT_NEAR(jpeg.data.images.min().item<float>() * 255, 200, 1);
}

TEST_F(ImageFolderTest, BadInputNamesTheFileOrFolder) {
  const std::string root = smallSet();
  EXPECT_EQ(loadError([&] { loadImageFolder(at("missing")); }), "image folder " + at("missing") + " is not a directory");
  fs::create_directories(at("flat"));
  EXPECT_TRUE(loadError([&] { loadImageFolder(at("flat")); }).find("has no class folders") != std::string::npos);

  fs::create_directories(root + "/c");
  EXPECT_EQ(loadError([&] { loadImageFolder(root); }),
            "class folder " + root + "/c holds no images (.png, .jpg or .jpeg files)");
  fs::remove(root + "/c");

  truncate(root + "/a/1.png", 40);
  const std::string truncated = loadError([&] { loadImageFolder(root); });
  EXPECT_EQ(truncated.rfind(root + "/a/1.png: ", 0), 0u) << truncated;

  std::ofstream(root + "/b/1.png") << "text, not a PNG";
  const std::string text = loadError([&] { loadImageFolder(root, {.skipBadRecords = 1}); });
  EXPECT_EQ(text.rfind(root + "/b/1.png: neither a PNG nor a JPEG file", 0), 0u) << text;
  EXPECT_NE(text.find("more than the 1 to skip"), std::string::npos) << text;

  writePng(root + "/b/2.png", 5, 3, 1, pattern(15, 3));
  const ImageFolder kept = loadImageFolder(root, {.skipBadRecords = 3});
  EXPECT_EQ(kept.data.size(), 2);
  ASSERT_EQ(kept.skipped.size(), 3u);
  EXPECT_EQ(kept.skipped[0].rfind(root + "/a/1.png: ", 0), 0u);
  EXPECT_EQ(kept.skipped[1].rfind(root + "/b/1.png: ", 0), 0u);
  EXPECT_EQ(kept.skipped[2], root + "/b/2.png: is 5x3 grayscale where the first image is 4x3 grayscale "
                                    "(every image of a set must have one size)");
  EXPECT_TRUE(kept.data.labels.equal(::torch::tensor({0, 1}, ::torch::kInt64)));

  fs::create_directories(at("jpeg/y"));
  writeJpeg(at("jpeg/y/0.jpg"), 16, 16, pattern(256, 1));
  truncate(at("jpeg/y/0.jpg"), fs::file_size(at("jpeg/y/0.jpg")) / 2);
  const std::string jpeg = loadError([&] { loadImageFolder(at("jpeg")); });
  EXPECT_EQ(jpeg.rfind(at("jpeg/y/0.jpg") + ": a damaged JPEG", 0), 0u) << jpeg;
}

TEST_F(ImageFolderTest, ResizesImagesOfAnySize) {
  fs::create_directories(at("sizes/a"));
  writePng(at("sizes/a/0.png"), 4, 4, 1, Bytes(16, 100));
  writePng(at("sizes/a/1.png"), 8, 6, 1, Bytes(48, 40));
  const ImageFolder set = loadImageFolder(at("sizes"), {.height = 5, .width = 3, .mean = {0}, .std = {1}});
  ASSERT_EQ(set.data.images.sizes(), (std::vector<std::int64_t>{2, 1, 5, 3}));
  // A flat image stays flat.
  EXPECT_FLOAT_EQ(set.data.images[0].min().item<float>() * 255, 100);
  EXPECT_FLOAT_EQ(set.data.images[0].max().item<float>() * 255, 100);
  EXPECT_FLOAT_EQ(set.data.images[1].max().item<float>() * 255, 40);
  EXPECT_THROW(loadImageFolder(at("sizes"), {.height = 5}), InvalidArgument);
}

Batch counting(std::int64_t n, std::int64_t side, std::int64_t index) {
  Batch b;
  b.images = ::torch::arange(n * side * side, ::torch::kFloat32).reshape({n, 1, side, side});
  b.labels = ::torch::zeros({n}, ::torch::kInt64);
  b.index = index;
  return b;
}

TEST(Transforms, FlipsAndCropsDrawnFromTheBatchsOwnSeed) {
  Batch all = counting(4, 5, 0);
  applyTransforms(all, {randomHorizontalFlip(1.0)}, 7);
  EXPECT_TRUE(all.images.equal(counting(4, 5, 0).images.flip({-1})));
  Batch none = counting(4, 5, 0);
  applyTransforms(none, {randomHorizontalFlip(0.0)}, 7);
  EXPECT_TRUE(none.images.equal(counting(4, 5, 0).images));

  // A crop: the image's size, each a window of the padded image (fill where it reaches the pad).
  Batch cropped = counting(64, 5, 3);
  applyTransforms(cropped, {randomCrop(2, -1)}, 7);
  ASSERT_EQ(cropped.images.sizes(), (std::vector<std::int64_t>{64, 1, 5, 5}));
  const ::torch::Tensor padded = ::torch::constant_pad_nd(counting(64, 5, 3).images, {2, 2, 2, 2}, -1);
  int shifted = 0;
  for (std::int64_t k = 0; k < 64; ++k) {
    bool found = false;
    for (std::int64_t y = 0; y <= 4 && !found; ++y)
      for (std::int64_t x = 0; x <= 4 && !found; ++x)
        found = cropped.images[k].equal(padded[k].narrow(-2, y, 5).narrow(-1, x, 5));
    EXPECT_TRUE(found) << "image " << k;
    shifted += cropped.images[k].equal(counting(64, 5, 3).images[k]) ? 0 : 1;
  }
  EXPECT_GT(shifted, 32);  // 24 of 25 places move the window

  // The same (seed, index): the same draws; another index or seed: others.
  const auto draw = [](std::uint64_t seed, std::int64_t index) {
    Batch b = counting(64, 5, index);
    applyTransforms(b, {randomHorizontalFlip(0.5), randomCrop(2)}, seed);
    return b.images;
  };
  EXPECT_TRUE(draw(1, 5).equal(draw(1, 5)));
  EXPECT_FALSE(draw(1, 5).equal(draw(1, 6)));
  EXPECT_FALSE(draw(1, 5).equal(draw(2, 5)));
  EXPECT_THROW(randomHorizontalFlip(1.5), InvalidArgument);
  EXPECT_THROW(randomCrop(-1), InvalidArgument);
}

TEST(Transforms, ALoaderAppliesThemAlikeOnAnyNumberOfThreads) {
  Dataset data;
  data.images = ::torch::randn({256, 1, 6, 6});
  data.labels = ::torch::zeros({256}, ::torch::kInt64);
  std::vector<std::vector<std::int64_t>> batches;
  for (std::int64_t b = 0; b < 8; ++b) {
    batches.emplace_back();
    for (std::int64_t i = 0; i < 32; ++i) batches.back().push_back(b * 32 + i);
  }
  const auto run = [&](int workers) {
    LoaderOptions o;
    o.workers = workers;
    o.transforms = {randomHorizontalFlip(), randomCrop(1)};
    o.seed = 11;
    Loader loader(data, batches, o);
    std::vector<::torch::Tensor> out;
    while (Batch b = loader.next()) out.push_back(b.images);
    return out;
  };
  const auto alone = run(0), three = run(3);
  ASSERT_EQ(alone.size(), 8u);
  ASSERT_EQ(three.size(), 8u);
  for (std::size_t i = 0; i < alone.size(); ++i) EXPECT_TRUE(alone[i].equal(three[i])) << "batch " << i;
  EXPECT_FALSE(alone[0].equal(data.images.narrow(0, 0, 32)));  // transformed
  EXPECT_TRUE(data.images.equal(data.images.clone()));
}

// The export script's PNGs are the IDX files' images, to the bit after the same normalisation.
TEST_F(ImageFolderTest, ExportedFashionMnistLoadsAsTheIdxFiles) {
  std::error_code ec;
  if (!fs::exists(std::string(kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz", ec))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const test::ProgramRun exported = test::runProgram(
      {{"/usr/bin/python3", test::sourceDir() + "/scripts/export-fashion-mnist.py", at("fm"), "--limit",
        "300"},
       test::cleanEnvironment()},
      std::chrono::seconds(120));
  ASSERT_EQ(exported.exitCode, 0) << exported.describe();
  const Dataset idx = loadFashionMnist("", "t10k");
  const ImageFolder png =
      loadImageFolder(at("fm/test"), {.mean = {kFashionMnistMean}, .std = {kFashionMnistStd}});
  ASSERT_EQ(png.data.size(), 300);
  EXPECT_EQ(png.classes.front(), "0-t-shirt-top");
  for (std::int64_t i = 0; i < png.data.size(); ++i) {
    const std::int64_t index = std::stoll(fs::path(png.files[static_cast<std::size_t>(i)]).stem().string());
    ASSERT_TRUE(png.data.images[i].equal(idx.images[index])) << png.files[static_cast<std::size_t>(i)];
    ASSERT_EQ(png.data.labels[i].item<std::int64_t>(), idx.labels[index].item<std::int64_t>());
  }
}

}  // namespace
}  // namespace gyre::data
