// gyre::data::loadMnist and loadFashionMnist: one split of an MNIST-layout data set, decoded and
// normalised, and the process-wide cache of decoded splits.
#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <new>
#include <cstdio>
#include <filesystem>
#include <map>

#include "common/mutex.h"
#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/data.h"

namespace gyre::data {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSide = 28;
constexpr std::int64_t kClasses = 10;

// What tells the MNIST-layout data sets apart.
struct Format {
  const char* name;     // "Fashion-MNIST", in messages
  const char* package;  // Debian's package, or null
  double mean;
  double std;
};

constexpr Format kFashion{"Fashion-MNIST", "dataset-fashion-mnist", kFashionMnistMean, kFashionMnistStd};
constexpr Format kDigits{"MNIST", nullptr, kMnistMean, kMnistStd};

std::string notFound(const Format& f, const std::string& dir, const std::string& detail) {
  std::string message = std::string(f.name) + " not found in " + dir + detail;
  if (f.package != nullptr)
    message += std::string(": install Debian's ") + f.package + " package (sudo apt-get install " + f.package +
               ") or pass the directory that holds its files (gyre train: --data-dir)";
  return message;
}

// DIR/NAME.gz, or DIR/NAME when only the uncompressed file is there.
std::string findFile(const Format& f, const std::string& dir, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(notFound(f, dir, ""));
  for (const fs::path& path : {fs::path(dir) / (name + ".gz"), fs::path(dir) / name})
    if (fs::exists(path, ec)) return path.string();
  throw Error(notFound(f, dir, " (there is no " + name + ".gz)"));
}

// An uninitialised float32 tensor in memory that the kernel may back with 2 MB pages (where
// transparent huge pages are on "madvise", as on Debian): a training split is 188 MB, and faulting
// it in 4 KB pages costs each worker about half a second on a virtual machine.
::torch::Tensor hugePageTensor(at::IntArrayRef shape) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  std::size_t bytes = sizeof(float);
  for (const std::int64_t d : shape) bytes *= static_cast<std::size_t>(d);
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  void* memory = std::aligned_alloc(kHuge, bytes);
  if (memory == nullptr) throw std::bad_alloc();
  ::madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: without it the tensor is as good
  return ::torch::from_blob(memory, shape, [](void* p) { std::free(p); }, ::torch::kFloat32);
}

Dataset decode(const Format& f, const std::string& imagesPath, const std::string& labelsPath) {
  IdxArray images = readIdxFile(imagesPath, 3);
  IdxArray labels = readIdxFile(labelsPath, 1);
  if (images.dims[1] != kSide || images.dims[2] != kSide)
    throw Error(imagesPath + " holds " + std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]) +
                " images; " + f.name + "'s are 28x28");
  if (images.dims[0] != labels.dims[0])
    throw Error(imagesPath + " holds " + std::to_string(images.dims[0]) + " images but " + labelsPath + " " +
                std::to_string(labels.dims[0]) + " labels");
  for (std::uint8_t label : labels.data)
    if (label >= kClasses)
      throw Error(labelsPath + " holds the label " + std::to_string(label) + "; " + f.name + "'s are 0 to 9");

  const std::int64_t n = images.dims[0];
  Dataset set;
  // A pixel has 256 values: normalise those once, through the same tensor operations as a whole
  // image would take, and look every pixel up. One pass over the images and one float buffer,
  // instead of four passes that each fault in a new 188 MB tensor (about 2 s of each worker's start).
  const ::torch::Tensor table = ::torch::arange(256, ::torch::kUInt8)
                                    .to(::torch::kFloat32)
                                    .div(255)
                                    .sub(f.mean)
                                    .div(f.std)
                                    .contiguous();
  const float* value = table.data_ptr<float>();
  set.images = hugePageTensor({n, 1, kSide, kSide});
  float* out = set.images.data_ptr<float>();
  const std::uint8_t* pixel = images.data.data();
  const std::size_t pixels = images.data.size();
  for (std::size_t i = 0; i < pixels; ++i) out[i] = value[pixel[i]];
  set.labels = ::torch::from_blob(labels.data.data(), {n}, ::torch::kUInt8).to(::torch::kInt64);
  return set;
}

// The cache: decoded splits by what they were decoded from.
struct Cache {
  Mutex mu;
  std::map<std::string, Dataset> sets GYRE_GUARDED_BY(mu);
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: loads may run during static destruction
  return *c;
}

// A file's identity: canonical path, size and modification time (a replaced file is decoded anew).
std::string identity(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  const std::string name = ec ? path : canonical.string();
  const auto size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return name + "|" + std::to_string(ec ? 0 : size) + "|" + std::to_string(ec ? 0 : mtime);
}

std::string cacheKey(const Format& f, const std::string& imagesPath, const std::string& labelsPath) {
  char norm[64];
  std::snprintf(norm, sizeof norm, "%.17g|%.17g", f.mean, f.std);
  return identity(imagesPath) + "\n" + identity(labelsPath) + "\n" + norm;
}

Dataset load(const Format& f, const std::string& dir, const std::string& split,
             const DatasetOptions& options) {
  const std::string imagesPath = findFile(f, dir, split + "-images-idx3-ubyte");
  const std::string labelsPath = findFile(f, dir, split + "-labels-idx1-ubyte");
  if (!options.cache) return decode(f, imagesPath, labelsPath);
  const std::string key = cacheKey(f, imagesPath, labelsPath);
  Cache& c = cache();
  {
    MutexLock lock(c.mu);
    if (const auto it = c.sets.find(key); it != c.sets.end()) return it->second;
  }
  // Decoded without the lock (other splits load meanwhile); a concurrent load of the same split
  // decodes it too, and the first to finish stays.
  Dataset set = decode(f, imagesPath, labelsPath);
  MutexLock lock(c.mu);
  return c.sets.emplace(key, std::move(set)).first->second;
}

}  // namespace

Dataset loadFashionMnist(const std::string& dir, const std::string& split, DatasetOptions options) {
  return load(kFashion, dir.empty() ? kFashionMnistDir : dir, split, options);
}

Dataset loadMnist(const std::string& dir, const std::string& split, DatasetOptions options) {
  GYRE_USAGE_CHECK(!dir.empty(),
                   "loadMnist: MNIST has no default directory; pass the one that holds its IDX files "
                   "(train-images-idx3-ubyte.gz, ...)");
  return load(kDigits, dir, split, options);
}

std::size_t clearCache() {
  Cache& c = cache();
  MutexLock lock(c.mu);
  const std::size_t n = c.sets.size();
  c.sets.clear();
  return n;
}

}  // namespace gyre::data
