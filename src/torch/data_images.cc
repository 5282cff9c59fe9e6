// gyre::data::loadImageFolder: ROOT/CLASS/*.png|*.jpg as torchvision's ImageFolder lists them,
// decoded on several threads into one uint8 tensor, then normalised per channel.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "data/image_decode.h"
#include "data/image_files.h"
#include "data/skips.h"
#include "torch/image_tensor.h"

namespace gyre::data {

ImageFolder loadImageFolder(const std::string& root, const ImageFolderOptions& options) {
  GYRE_USAGE_CHECK(options.threads >= 0, "loadImageFolder: threads must not be negative, not ", options.threads);
  GYRE_USAGE_CHECK(options.skipBadRecords >= 0, "loadImageFolder: skipBadRecords must not be negative, not ",
                   options.skipBadRecords);
  const detail::ImageListing listing = detail::listImageFolder(root);
  const auto n = static_cast<std::int64_t>(listing.files.size());

  // The first readable image sets the shape: its size, and grayscale or colour.
  detail::ImageHeader shape;
  if (options.channels != 0) {
    GYRE_USAGE_CHECK(options.channels == 1 || options.channels == 3,
                     "loadImageFolder: channels must be 0 (the first image's), 1 or 3, not ", options.channels);
  }
  for (const std::string& file : listing.files) {
    std::string why;
    const std::vector<std::uint8_t> bytes = detail::readFileBytes(file, why);
    if (why.empty()) why = detail::readHeader(bytes, shape);
    if (why.empty()) break;
    if (options.skipBadRecords == 0) throw Error(file + ": " + why);
  }
  GYRE_ENFORCE(shape.width > 0, "no readable image in ", root);
  if (options.channels != 0) shape.channels = options.channels;
  GYRE_USAGE_CHECK((options.height == 0) == (options.width == 0) && options.height >= 0 && options.width >= 0,
                   "loadImageFolder: height and width must both be 0 (the first image's) or both positive, not ",
                   options.height, " x ", options.width);
  const bool resize = options.height > 0;
  if (resize) {
    shape.height = options.height;
    shape.width = options.width;
  }
  const std::size_t plane = static_cast<std::size_t>(shape.width) * static_cast<std::size_t>(shape.height);
  const std::size_t imageBytes = plane * static_cast<std::size_t>(shape.channels);

  // Decode: each thread takes the next image; a failed one records why.
  ::torch::Tensor pixels = ::torch::empty({n, shape.channels, shape.height, shape.width}, ::torch::kUInt8);
  std::uint8_t* out = pixels.data_ptr<std::uint8_t>();
  std::vector<std::string> failures(static_cast<std::size_t>(n));
  std::atomic<std::int64_t> next{0};
  const auto work = [&] {
    for (std::int64_t i = next++; i < n; i = next++) {
      const std::string& file = listing.files[static_cast<std::size_t>(i)];
      std::string& why = failures[static_cast<std::size_t>(i)];
      const std::vector<std::uint8_t> bytes = detail::readFileBytes(file, why);
      if (why.empty()) why = decodeImage(bytes, shape, resize, out + static_cast<std::size_t>(i) * imageBytes);
    }
  };
  const int threads = std::max(1, std::min<int>(options.threads > 0 ? options.threads
                                                                    : static_cast<int>(std::thread::hardware_concurrency()),
                                                static_cast<int>(std::min<std::int64_t>(n, 64))));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  ImageFolder set;
  set.classes = listing.classes;
  std::vector<std::int64_t> kept;
  kept.reserve(static_cast<std::size_t>(n));
  detail::SkipBudget budget(options.skipBadRecords, "images");
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string& why = failures[static_cast<std::size_t>(i)];
    if (why.empty()) {
      kept.push_back(i);
      set.files.push_back(listing.files[static_cast<std::size_t>(i)]);
      continue;
    }
    budget.skip(listing.files[static_cast<std::size_t>(i)] + ": " + why);
  }
  set.skipped = std::move(budget.skipped());
  set.data.labels = ::torch::tensor(listing.labels, ::torch::kInt64);
  if (static_cast<std::int64_t>(kept.size()) < n) {
    const ::torch::Tensor keep = ::torch::tensor(kept);
    pixels = pixels.index_select(0, keep);
    set.data.labels = set.data.labels.index_select(0, keep);
  }

  // Per channel: (x / 255 - mean) / std, with the given figures or the set's own (from the pixels'
  // exact sums, as gyre data pack takes them).
  set.mean = options.mean;
  set.std = options.std;
  if (set.mean.empty() || set.std.empty()) {
    std::vector<double> mean, sd;
    for (std::int64_t c = 0; c < shape.channels; ++c) {
      // Exact integer sums, a few thousand images at a time (int64 copies of them all would take
      // eight times the pixels' memory).
      std::uint64_t sum = 0, squares = 0;
      for (std::int64_t first = 0; first < pixels.size(0); first += 4096) {
        const ::torch::Tensor values = pixels.select(1, c).narrow(0, first, std::min<std::int64_t>(4096, pixels.size(0) - first))
                                           .to(::torch::kInt64);
        sum += static_cast<std::uint64_t>(values.sum().item<std::int64_t>());
        squares += static_cast<std::uint64_t>(values.mul(values).sum().item<std::int64_t>());
      }
      double m = 0, s = 0;
      detail::pixelMoments(sum, squares, static_cast<std::uint64_t>(pixels.numel() / shape.channels), m, s);
      mean.push_back(m);
      sd.push_back(s);
    }
    if (set.mean.empty()) set.mean = mean;
    if (set.std.empty()) set.std = sd;
  }
  GYRE_USAGE_CHECK(static_cast<int>(set.mean.size()) == shape.channels &&
                       static_cast<int>(set.std.size()) == shape.channels,
                   "loadImageFolder: ", set.mean.size(), " means and ", set.std.size(), " standard deviations for ",
                   shape.channels, " channel(s)");
  for (int c = 0; c < shape.channels; ++c)
    GYRE_USAGE_CHECK(set.std[static_cast<std::size_t>(c)] > 0, "image folder ", root, ": channel ", c,
                     " has standard deviation 0 (every pixel alike): give ImageFolderOptions::std");
  set.data.images = normalisedImages(pixels, set.mean, set.std);
  return set;
}

}  // namespace gyre::data
