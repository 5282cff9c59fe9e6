// Packing: each split's samples checked on several threads a chunk at a time, written in order,
// so memory holds one chunk of files whatever the set's size.
#include "data/pack.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "data/data_root.h"
#include "data/image_decode.h"
#include "data/image_files.h"
#include "data/skips.h"
#include "data/table.h"
#include "gyre/errors.h"

namespace gyre::data::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kChunk = 2048;  // images read and checked at a time

struct PixelSums {
  std::vector<std::uint64_t> sum, squares;
  std::uint64_t pixels = 0;  // per channel
};

class ImagePacker {
 public:
  ImagePacker(RecordManifest& m, SkipBudget& budget, int threads) : m_(m), budget_(budget), threads_(threads) {}

  void pack(const std::string& folder, RecordWriter& writer, bool training) {
    const ImageListing listing = listImageFolder(folder);
    if (training) {
      m_.classes = listing.classes;
      shapeFrom(listing);
      sums_.sum.assign(static_cast<std::size_t>(m_.channels), 0);
      sums_.squares.assign(static_cast<std::size_t>(m_.channels), 0);
    } else if (listing.classes != m_.classes) {
      throw Error(folder + " has other class folders than the training split's (" + std::to_string(listing.classes.size()) +
                  " against " + std::to_string(m_.classes.size()) + "): they must be the same");
    }
    const std::size_t n = listing.files.size();
    for (std::size_t first = 0; first < n; first += kChunk) {
      const std::size_t count = std::min(kChunk, n - first);
      std::vector<std::vector<std::uint8_t>> bytes(count);
      std::vector<std::string> why(count);
      check(listing, first, count, bytes, why, training);
      for (std::size_t k = 0; k < count; ++k) {
        if (!why[k].empty()) {
          budget_.skip(listing.files[first + k] + ": " + why[k]);
          continue;
        }
        writer.add(listing.labels[first + k], bytes[k].data(), bytes[k].size());
      }
    }
  }

  void finishStatistics() {
    for (int c = 0; c < m_.channels; ++c) {
      double mean = 0, sd = 0;
      pixelMoments(sums_.sum[static_cast<std::size_t>(c)], sums_.squares[static_cast<std::size_t>(c)], sums_.pixels,
                   mean, sd);
      m_.mean.push_back(mean);
      m_.std.push_back(sd);
      if (m_.std.back() == 0)
        throw Error("channel " + std::to_string(c) + " of the training images has standard deviation 0 (every pixel alike)");
    }
  }

 private:
  // The first readable image's size and channels are the set's.
  void shapeFrom(const ImageListing& listing) {
    for (const std::string& file : listing.files) {
      std::string why;
      ImageHeader header;
      const std::vector<std::uint8_t> bytes = readFileBytes(file, why);
      if (why.empty()) why = readHeader(bytes, header);
      if (why.empty()) {
        m_.channels = header.channels;
        m_.height = header.height;
        m_.width = header.width;
        return;
      }
    }
    throw Error("no readable image in " + listing.files.front().substr(0, listing.files.front().rfind('/')) + "'s set");
  }

  void check(const ImageListing& listing, std::size_t first, std::size_t count,
             std::vector<std::vector<std::uint8_t>>& bytes, std::vector<std::string>& why, bool training) {
    std::atomic<std::size_t> next{0};
    std::mutex mu;
    const std::size_t plane = static_cast<std::size_t>(m_.height) * static_cast<std::size_t>(m_.width);
    const ImageHeader shape{m_.width, m_.height, m_.channels};
    const auto work = [&] {
      PixelSums local;
      local.sum.assign(static_cast<std::size_t>(m_.channels), 0);
      local.squares.assign(static_cast<std::size_t>(m_.channels), 0);
      std::vector<std::uint8_t> pixels(plane * static_cast<std::size_t>(m_.channels));
      for (std::size_t k = next++; k < count; k = next++) {
        bytes[k] = readFileBytes(listing.files[first + k], why[k]);
        ImageHeader header;
        if (why[k].empty()) why[k] = decodeSized(bytes[k], shape, header, pixels.data());
        if (!why[k].empty()) {
          bytes[k].clear();
          continue;
        }
        if (!training) continue;
        for (int c = 0; c < m_.channels; ++c) {
          const std::uint8_t* p = pixels.data() + plane * static_cast<std::size_t>(c);
          std::uint64_t s = 0, q = 0;
          for (std::size_t i = 0; i < plane; ++i) {
            s += p[i];
            q += static_cast<std::uint64_t>(p[i]) * p[i];
          }
          local.sum[static_cast<std::size_t>(c)] += s;
          local.squares[static_cast<std::size_t>(c)] += q;
        }
        local.pixels += plane;
      }
      std::lock_guard<std::mutex> lock(mu);  // integer sums: the same in any order
      for (int c = 0; c < m_.channels; ++c) {
        sums_.sum[static_cast<std::size_t>(c)] += local.sum[static_cast<std::size_t>(c)];
        sums_.squares[static_cast<std::size_t>(c)] += local.squares[static_cast<std::size_t>(c)];
      }
      sums_.pixels += local.pixels;
    };
    const int threads = std::max(1, std::min<int>(threads_, static_cast<int>(count)));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
  }

  RecordManifest& m_;
  SkipBudget& budget_;
  int threads_;
  PixelSums sums_;
};

void packTable(RecordManifest& m, SkipBudget& budget, const std::string& file, RecordWriter& writer, bool training,
               const std::string& labelColumn) {
  TableRows rows = readTable(file, labelColumn, budget.left());
  for (const std::string& s : rows.skipped) budget.skipped().push_back(s);
  if (training) {
    m.features = rows.columns;
    m.classes = classesOf(rows.labels);
  } else if (rows.columns != m.features) {
    throw Error(file + " has other feature columns than the training split's (" + std::to_string(rows.columns.size()) +
                " against " + std::to_string(m.features.size()) + "): they must be the same, in the same order");
  }
  const std::vector<std::int64_t> labels = labelIndices(rows, m.classes, file);
  const std::size_t f = rows.columns.size();
  static_assert(sizeof(float) == 4, "features are stored as 4-byte floats");
  for (std::int64_t r = 0; r < rows.rows(); ++r)
    writer.add(labels[static_cast<std::size_t>(r)],
               reinterpret_cast<const std::uint8_t*>(rows.values.data() + static_cast<std::size_t>(r) * f), f * sizeof(float));
  if (!training) return;
  for (std::size_t c = 0; c < f; ++c) {
    double sum = 0, squares = 0;
    for (std::int64_t r = 0; r < rows.rows(); ++r) {
      const double v = rows.values[static_cast<std::size_t>(r) * f + c];
      sum += v;
      squares += v * v;
    }
    const double mean = sum / static_cast<double>(rows.rows());
    const double sd = std::sqrt(std::max(0.0, squares / static_cast<double>(rows.rows()) - mean * mean));
    m.mean.push_back(mean);
    m.std.push_back(sd > 0 ? sd : 1.0);  // a constant feature: centred, not scaled
  }
}

}  // namespace

RecordManifest packDataSet(const std::string& source, const std::string& dest, const PackOptions& options) {
  if (options.shardBytes < 1) throw InvalidArgument("--shard-size must be at least 1 byte");
  if (options.threads < 0) throw InvalidArgument("--threads must not be negative");
  if (options.skipBadRecords < 0) throw InvalidArgument("--skip-bad-records must not be negative");
  const DataRoot root = describeDataRoot(source);
  if (root.kind == DataKind::kRecords) throw Error(source + " is already packed (it holds " + kRecordManifestName + ")");
  std::error_code ec;
  const bool existed = fs::exists(dest, ec);
  if (existed && (!fs::is_directory(dest, ec) || !fs::is_empty(dest, ec)))
    throw Error(dest + " exists and is not an empty folder: gyre data pack writes into a new (or empty) one");
  fs::create_directories(dest, ec);
  if (ec) throw Error("cannot create " + dest + ": " + ec.message());

  RecordManifest m;
  m.kind = root.kind == DataKind::kImageFolders ? "images" : "features";
  m.source = fs::absolute(source, ec).lexically_normal().string();
  SkipBudget budget(options.skipBadRecords, "samples");
  const int threads = options.threads > 0 ? options.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ImagePacker images(m, budget, threads);
  std::vector<std::unique_ptr<RecordWriter>> writers;
  try {
    const std::string testName = fs::path(root.test).stem().string();  // "test" or "val"
    for (const auto& [split, path] : {std::pair{std::string("train"), root.train}, std::pair{testName, root.test}}) {
      writers.push_back(std::make_unique<RecordWriter>(dest, split, options.shardBytes));
      const bool training = split == "train";
      if (root.kind == DataKind::kImageFolders) {
        images.pack(path, *writers.back(), training);
        if (training) images.finishStatistics();
      } else {
        packTable(m, budget, path, *writers.back(), training, options.labelColumn);
      }
      m.splits[split] = writers.back()->finish();
      if (m.splits[split].records == 0) throw Error(path + " holds no sample that could be packed");
    }
    m.skipped = budget.skipped();
    writeRecordManifest(dest, m);
  } catch (...) {
    for (auto& w : writers) w->remove();
    if (!existed) fs::remove(dest, ec);
    throw;
  }
  return m;
}

}  // namespace gyre::data::detail
