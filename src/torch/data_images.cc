// gyre::data::loadImageFolder: ROOT/CLASS/*.png|*.jpg as torchvision's ImageFolder lists them,
// decoded on several threads into one uint8 tensor, then normalised per channel.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "torch/image_decode.h"

namespace gyre::data {
namespace {

namespace fs = std::filesystem;

bool isImageName(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

struct Listing {
  std::vector<std::string> classes;
  std::vector<std::string> files;
  std::vector<std::int64_t> labels;
};

// The class folders in name order, and each one's images in name order.
Listing list(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw Error("image folder " + root + " is not a directory");
  Listing l;
  std::vector<fs::path> folders;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) folders.push_back(it->path());
  if (ec) throw Error("cannot list the image folder " + root + ": " + ec.message());
  std::sort(folders.begin(), folders.end());
  if (folders.empty())
    throw Error("image folder " + root + " has no class folders: expected " + root + "/CLASS/IMAGE.png (or .jpg)");
  for (const fs::path& folder : folders) {
    std::vector<std::string> images;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
      if (isImageName(it->path()) && !it->is_directory(ec)) images.push_back(it->path().string());
    if (ec) throw Error("cannot list the class folder " + folder.string() + ": " + ec.message());
    if (images.empty())
      throw Error("class folder " + folder.string() + " holds no images (.png, .jpg or .jpeg files)");
    std::sort(images.begin(), images.end());
    const auto label = static_cast<std::int64_t>(l.classes.size());
    l.classes.push_back(folder.filename().string());
    for (std::string& image : images) {
      l.files.push_back(std::move(image));
      l.labels.push_back(label);
    }
  }
  return l;
}

// The whole file, or an empty string with `why` set.
std::vector<std::uint8_t> readBytes(const std::string& path, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened (" + std::string(std::strerror(errno)) + ")";
    return {};
  }
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) why = "cannot be read";
  return bytes;
}

std::string shapeText(const detail::ImageHeader& h) {
  return std::to_string(h.width) + "x" + std::to_string(h.height) + (h.channels == 1 ? " grayscale" : " colour");
}

// Decoded at its own size, then resized bilinearly to `shape` (rounded back to 8 bits).
std::string decodeResized(const std::vector<std::uint8_t>& bytes, const detail::ImageHeader& shape,
                          const detail::ImageHeader& header, std::uint8_t* out) {
  ::torch::Tensor own = ::torch::empty({1, shape.channels, header.height, header.width}, ::torch::kUInt8);
  if (std::string why = detail::decode(bytes, shape.channels, header, own.data_ptr<std::uint8_t>()); !why.empty())
    return why;
  namespace F = ::torch::nn::functional;
  const ::torch::Tensor resized =
      F::interpolate(own.to(::torch::kFloat32), F::InterpolateFuncOptions()
                                                    .size(std::vector<std::int64_t>{shape.height, shape.width})
                                                    .mode(::torch::kBilinear)
                                                    .align_corners(false))
          .round_()
          .clamp_(0, 255)
          .to(::torch::kUInt8)
          .contiguous();
  std::memcpy(out, resized.data_ptr<std::uint8_t>(), static_cast<std::size_t>(resized.numel()));
  return "";
}

}  // namespace

ImageFolder loadImageFolder(const std::string& root, const ImageFolderOptions& options) {
  GYRE_USAGE_CHECK(options.threads >= 0, "loadImageFolder: threads must not be negative, not ", options.threads);
  GYRE_USAGE_CHECK(options.skipBadRecords >= 0, "loadImageFolder: skipBadRecords must not be negative, not ",
                   options.skipBadRecords);
  const Listing listing = list(root);
  const auto n = static_cast<std::int64_t>(listing.files.size());

  // The first readable image sets the shape: its size, and grayscale or colour.
  detail::ImageHeader shape;
  if (options.channels != 0) {
    GYRE_USAGE_CHECK(options.channels == 1 || options.channels == 3,
                     "loadImageFolder: channels must be 0 (the first image's), 1 or 3, not ", options.channels);
  }
  for (const std::string& file : listing.files) {
    std::string why;
    const std::vector<std::uint8_t> bytes = readBytes(file, why);
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
      const std::vector<std::uint8_t> bytes = readBytes(file, why);
      detail::ImageHeader header;
      if (why.empty()) why = detail::readHeader(bytes, header);
      const bool sameSize = header.width == shape.width && header.height == shape.height;
      if (why.empty() && !sameSize && !resize)
        why = "is " + shapeText(header) + " where the first image is " + shapeText(shape) +
              " (every image of a set must have one size)";
      std::uint8_t* const image = out + static_cast<std::size_t>(i) * imageBytes;
      if (why.empty() && sameSize) why = detail::decode(bytes, shape.channels, header, image);
      if (why.empty() && !sameSize) why = decodeResized(bytes, shape, header, image);
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
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string& why = failures[static_cast<std::size_t>(i)];
    if (why.empty()) {
      kept.push_back(i);
      set.files.push_back(listing.files[static_cast<std::size_t>(i)]);
      continue;
    }
    const std::string& file = listing.files[static_cast<std::size_t>(i)];
    if (static_cast<std::int64_t>(set.skipped.size()) >= options.skipBadRecords)
      throw Error(file + ": " + why +
                  (options.skipBadRecords > 0 ? " (and " + std::to_string(set.skipped.size()) +
                                                    " bad images before it, more than the " +
                                                    std::to_string(options.skipBadRecords) + " to skip)"
                                              : ""));
    set.skipped.push_back(file + ": " + why);
  }
  set.data.labels = ::torch::tensor(listing.labels, ::torch::kInt64);
  if (static_cast<std::int64_t>(kept.size()) < n) {
    const ::torch::Tensor keep = ::torch::tensor(kept);
    pixels = pixels.index_select(0, keep);
    set.data.labels = set.data.labels.index_select(0, keep);
  }

  // Per channel: (x / 255 - mean) / std, with the given figures or the set's own.
  ::torch::Tensor images = pixels.to(::torch::kFloat32).div_(255);
  set.mean = options.mean;
  set.std = options.std;
  if (set.mean.empty()) {
    const ::torch::Tensor m = images.mean({0, 2, 3}, false, ::torch::kFloat64);
    for (std::int64_t c = 0; c < shape.channels; ++c) set.mean.push_back(m[c].item<double>());
  }
  if (set.std.empty()) {
    const ::torch::Tensor s = images.to(::torch::kFloat64).std({0, 2, 3}, false);
    for (std::int64_t c = 0; c < shape.channels; ++c) set.std.push_back(s[c].item<double>());
  }
  GYRE_USAGE_CHECK(static_cast<int>(set.mean.size()) == shape.channels &&
                       static_cast<int>(set.std.size()) == shape.channels,
                   "loadImageFolder: ", set.mean.size(), " means and ", set.std.size(), " standard deviations for ",
                   shape.channels, " channel(s)");
  for (int c = 0; c < shape.channels; ++c) {
    GYRE_USAGE_CHECK(set.std[static_cast<std::size_t>(c)] > 0, "image folder ", root, ": channel ", c,
                     " has standard deviation 0 (every pixel alike): give ImageFolderOptions::std");
    images.select(1, c).sub_(set.mean[static_cast<std::size_t>(c)]).div_(set.std[static_cast<std::size_t>(c)]);
  }
  set.data.images = images;
  return set;
}

}  // namespace gyre::data
