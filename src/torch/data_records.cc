// gyre::data::RecordSet: a packed split read record by record (data/records.h) and decoded into
// each batch on the thread that gathers it.
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "common/check.h"
#include "common/mutex.h"
#include "data/records.h"
#include "data/skips.h"
#include "gyre/errors.h"
#include "gyre/torch/data_files.h"
#include "torch/image_tensor.h"

namespace gyre::data {

struct RecordSet::Impl {
  std::string dir;
  RecordSetOptions options;
  detail::RecordManifest manifest;
  std::unique_ptr<detail::RecordReader> reader;
  detail::ImageHeader shape;  // images: the decoded shape (after resizing)
  bool resize = false;
  std::int64_t sampleBytes = 0;  // of one decoded sample: uint8 pixels, or float32 features

  mutable Mutex mu;
  mutable std::set<std::int64_t> badRecords GYRE_GUARDED_BY(mu);
  mutable detail::SkipBudget budget GYRE_GUARDED_BY(mu) = detail::SkipBudget(0, "records");

  // Record i into `out` (sampleBytes); its label. Returns "" or why it cannot be had.
  std::string readInto(std::int64_t i, std::uint8_t* out, std::int64_t& label) const {
    std::vector<std::uint8_t> sample;
    if (std::string why = reader->read(i, label, sample); !why.empty()) return why;
    if (label < 0 || label >= static_cast<std::int64_t>(manifest.classes.size()))
      return "has label " + std::to_string(label) + ", outside the " + std::to_string(manifest.classes.size()) + " classes";
    if (manifest.kind == "images") return decodeImage(sample, shape, resize, out);
    if (static_cast<std::int64_t>(sample.size()) != sampleBytes)
      return "holds " + std::to_string(sample.size()) + " bytes of features where " + std::to_string(sampleBytes) +
             " were packed";
    std::copy(sample.begin(), sample.end(), out);
    return "";
  }

  // A record that cannot be had: counted once (it comes back every epoch) within the budget.
  void bad(std::int64_t i, const std::string& why) const {
    const std::string where = reader->where(i) + ": " + why;
    MutexLock lock(mu);
    if (badRecords.count(i) > 0) return;
    budget.skip(where);
    badRecords.insert(i);
  }
};

RecordSet::RecordSet(const std::string& dir, RecordSetOptions options) : impl_(std::make_unique<Impl>()) {
  GYRE_USAGE_CHECK(options.skipBadRecords >= 0, "RecordSet: skipBadRecords must not be negative, not ",
                   options.skipBadRecords);
  GYRE_USAGE_CHECK((options.height == 0) == (options.width == 0) && options.height >= 0 && options.width >= 0,
                   "RecordSet: height and width must both be 0 (as packed) or both positive, not ", options.height,
                   " x ", options.width);
  Impl& d = *impl_;
  d.dir = dir;
  d.options = options;
  {
    MutexLock lock(d.mu);
    d.budget = detail::SkipBudget(options.skipBadRecords, "records");
  }
  d.manifest = detail::readRecordManifest(dir);
  const auto split = d.manifest.splits.find(options.split);
  if (split == d.manifest.splits.end()) {
    std::string names;
    for (const auto& [name, s] : d.manifest.splits) names += (names.empty() ? "" : ", ") + name;
    throw Error(dir + " has no split '" + options.split + "' (it has " + names + ")");
  }
  d.reader = std::make_unique<detail::RecordReader>(dir, options.split, split->second);
  if (d.manifest.kind == "images") {
    GYRE_USAGE_CHECK(d.manifest.channels > 0 && d.manifest.height > 0 && d.manifest.width > 0, dir,
                     "/index.json: images without a shape");
    d.shape = {options.height > 0 ? options.width : d.manifest.width, options.height > 0 ? options.height : d.manifest.height,
               d.manifest.channels};
    d.resize = options.height > 0;
    d.sampleBytes = static_cast<std::int64_t>(d.shape.channels) * d.shape.height * d.shape.width;
  } else {
    GYRE_USAGE_CHECK(options.height == 0, "RecordSet: ", dir, " holds features, not images: it cannot be resized");
    d.sampleBytes = static_cast<std::int64_t>(d.manifest.features.size() * sizeof(float));
  }
  for (double s : d.manifest.std) GYRE_ENFORCE(s > 0, dir, "/index.json: a standard deviation of ", s);
}

RecordSet::~RecordSet() = default;

std::int64_t RecordSet::size() const { return impl_->reader->size(); }
bool RecordSet::images() const { return impl_->manifest.kind == "images"; }
const std::vector<std::string>& RecordSet::classes() const { return impl_->manifest.classes; }
const std::vector<std::string>& RecordSet::columns() const { return impl_->manifest.features; }
const std::vector<double>& RecordSet::mean() const { return impl_->manifest.mean; }
const std::vector<double>& RecordSet::std() const { return impl_->manifest.std; }

std::vector<std::int64_t> RecordSet::sampleShape() const {
  if (images()) return {impl_->shape.channels, impl_->shape.height, impl_->shape.width};
  return {static_cast<std::int64_t>(impl_->manifest.features.size())};
}

std::vector<std::string> RecordSet::skipped() const {
  MutexLock lock(impl_->mu);
  return impl_->budget.skipped();
}

Batch RecordSet::gather(const std::vector<std::int64_t>& indices, std::int64_t index) const {
  const Impl& d = *impl_;
  const auto n = static_cast<std::int64_t>(indices.size());
  std::vector<std::int64_t> shape = sampleShape();
  shape.insert(shape.begin(), n);
  ::torch::Tensor raw = ::torch::empty(shape, images() ? ::torch::kUInt8 : ::torch::kFloat32);
  auto* out = static_cast<std::uint8_t*>(raw.data_ptr());
  std::vector<std::int64_t> labels;
  labels.reserve(indices.size());
  std::int64_t kept = 0;
  for (std::int64_t i : indices) {
    GYRE_USAGE_CHECK(i >= 0 && i < size(), "RecordSet: sample ", i, " is outside the ", size(), " of ", d.dir);
    std::int64_t label = 0;
    if (std::string why = d.readInto(i, out + kept * d.sampleBytes, label); !why.empty()) {
      d.bad(i, why);
      continue;
    }
    labels.push_back(label);
    ++kept;
  }
  GYRE_ENFORCE(kept > 0 || n == 0, "every sample of batch ", index, " of ", d.dir, " is bad");
  if (kept < n) raw = raw.slice(0, 0, kept);
  Batch batch;
  batch.index = index;
  batch.labels = ::torch::tensor(labels, ::torch::kInt64);
  if (images()) {
    batch.images = normalisedImages(raw, d.manifest.mean, d.manifest.std);
  } else {
    const ::torch::Tensor mean = ::torch::tensor(d.manifest.mean, ::torch::kFloat64).to(::torch::kFloat32);
    const ::torch::Tensor sd = ::torch::tensor(d.manifest.std, ::torch::kFloat64).to(::torch::kFloat32);
    batch.images = raw.sub_(mean).div_(sd);
  }
  return batch;
}

Dataset RecordSet::load(int threads) const {
  GYRE_USAGE_CHECK(threads >= 0, "RecordSet::load: threads must not be negative, not ", threads);
  constexpr std::int64_t kChunk = 1024;
  const std::int64_t n = size();
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Batch> parts(static_cast<std::size_t>(chunks));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(chunks));
  std::atomic<std::int64_t> next{0};
  const auto work = [&] {
    for (std::int64_t c = next++; c < chunks; c = next++) {
      std::vector<std::int64_t> indices;
      for (std::int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) indices.push_back(i);
      try {
        parts[static_cast<std::size_t>(c)] = gather(indices, c);
      } catch (...) {
        errors[static_cast<std::size_t>(c)] = std::current_exception();
      }
    }
  };
  const int count = std::max<int>(1, std::min<std::int64_t>(threads > 0 ? threads : std::thread::hardware_concurrency(), chunks));
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<::torch::Tensor> images, labels;
  for (Batch& b : parts) {
    images.push_back(b.images);
    labels.push_back(b.labels);
  }
  Dataset data;
  data.images = ::torch::cat(images);
  data.labels = ::torch::cat(labels);
  return data;
}

}  // namespace gyre::data
