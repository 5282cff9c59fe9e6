#include "train/fashion_mnist.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

constexpr std::int64_t kSide = 28;
constexpr std::int64_t kClasses = 10;
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;

std::string notFound(const std::string& dir, const std::string& detail) {
  return "Fashion-MNIST not found in " + dir + detail +
         ": install Debian's dataset-fashion-mnist package (sudo apt-get install dataset-fashion-mnist) "
         "or pass --data-dir";
}

// DIR/NAME.gz, or DIR/NAME when only the uncompressed file is there.
std::string findFile(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(notFound(dir, ""));
  for (const fs::path& path : {fs::path(dir) / (name + ".gz"), fs::path(dir) / name})
    if (fs::exists(path, ec)) return path.string();
  throw Error(notFound(dir, " (there is no " + name + ".gz)"));
}

std::vector<std::uint8_t> readAll(const std::string& path) {
  struct Closer {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  errno = 0;
  std::unique_ptr<gzFile_s, Closer> file(gzopen(path.c_str(), "rb"));
  if (!file) throw Error("cannot open " + path + ": " + std::strerror(errno != 0 ? errno : ENOMEM));
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(1 << 20);
  for (;;) {
    const int n = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const char* zlibWhy = gzerror(file.get(), &code);
      const std::string why = code == Z_ERRNO ? std::strerror(errno) : zlibWhy ? zlibWhy : "zlib error";
      throw Error("cannot read " + path + ": " + why + " (a damaged download? reinstall the package)");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  return out;
}

}  // namespace

IdxArray readIdxFile(const std::string& path, int rank) {
  std::vector<std::uint8_t> bytes = readAll(path);
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (bytes.size() < header)
    throw Error(path + " is not an IDX file: " + std::to_string(bytes.size()) +
                " bytes, shorter than its header");
  // Magic number: two zero bytes, the element type (0x08: unsigned byte), the number of dimensions.
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != rank) {
    char magic[16];
    std::snprintf(magic, sizeof magic, "%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    throw Error(path + " is not an IDX file of unsigned bytes with " + std::to_string(rank) +
                " dimensions (magic number 0x" + magic + ", expected 0x000008" + (rank < 16 ? "0" : "") +
                std::to_string(rank) + ")");
  }
  IdxArray array;
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const std::uint8_t* p = bytes.data() + 4 + 4 * d;
    const std::int64_t dim = (std::int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    array.dims.push_back(dim);
    count *= dim;
  }
  const auto have = static_cast<std::int64_t>(bytes.size() - header);
  if (have < count)
    throw Error(path + " is truncated: its header announces " + std::to_string(count) +
                " bytes of data, it holds " + std::to_string(have) +
                " (a damaged download? reinstall the package)");
  if (have > count)
    throw Error(path + " has " + std::to_string(have - count) + " bytes after the " + std::to_string(count) +
                " its header announces");
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

ImageSet loadFashionMnistSplit(const std::string& dirIn, const std::string& split) {
  const std::string dir = dirIn.empty() ? kFashionMnistDir : dirIn;
  const std::string imagesPath = findFile(dir, split + "-images-idx3-ubyte");
  const std::string labelsPath = findFile(dir, split + "-labels-idx1-ubyte");
  IdxArray images = readIdxFile(imagesPath, 3);
  IdxArray labels = readIdxFile(labelsPath, 1);
  if (images.dims[1] != kSide || images.dims[2] != kSide)
    throw Error(imagesPath + " holds " + std::to_string(images.dims[1]) + "x" +
                std::to_string(images.dims[2]) + " images; Fashion-MNIST's are 28x28");
  if (images.dims[0] != labels.dims[0])
    throw Error(imagesPath + " holds " + std::to_string(images.dims[0]) + " images but " + labelsPath + " " +
                std::to_string(labels.dims[0]) + " labels");
  for (std::uint8_t label : labels.data)
    if (label >= kClasses)
      throw Error(labelsPath + " holds the label " + std::to_string(label) + "; Fashion-MNIST's are 0 to 9");

  const std::int64_t n = images.dims[0];
  ImageSet set;
  set.images = ::torch::from_blob(images.data.data(), {n, 1, kSide, kSide}, ::torch::kUInt8)
                   .to(::torch::kFloat32)
                   .div(255)
                   .sub(kMean)
                   .div(kStd);
  set.labels = ::torch::from_blob(labels.data.data(), {n}, ::torch::kUInt8).to(::torch::kInt64);
  return set;
}

FashionMnist loadFashionMnist(const std::string& dir) {
  return {loadFashionMnistSplit(dir, "train"), loadFashionMnistSplit(dir, "t10k")};
}

}  // namespace gyre::train
