// Listing an image folder as torchvision's ImageFolder does, and reading a file whole.
#include "data/image_files.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gyre/errors.h"

namespace gyre::data::detail {
namespace {

namespace fs = std::filesystem;

bool isImageNameOf(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

bool isImageName(const std::string& path) { return isImageNameOf(fs::path(path)); }

// The class folders in name order, and each one's images in name order.
ImageListing listImageFolder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw Error("image folder " + root + " is not a directory");
  ImageListing l;
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
      if (isImageNameOf(it->path()) && !it->is_directory(ec)) images.push_back(it->path().string());
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

// The whole file, or an empty vector with `why` set.
std::vector<std::uint8_t> readFileBytes(const std::string& path, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened (" + std::string(std::strerror(errno)) + ")";
    return {};
  }
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) why = "cannot be read";
  return bytes;
}

void pixelMoments(std::uint64_t sum, std::uint64_t squares, std::uint64_t count, double& mean, double& std) {
  const auto n = static_cast<double>(count);
  mean = static_cast<double>(sum) / (255.0 * n);
  const double square = static_cast<double>(squares) / (255.0 * 255.0 * n);
  std = std::sqrt(std::max(0.0, square - mean * mean));
}

}  // namespace gyre::data::detail
