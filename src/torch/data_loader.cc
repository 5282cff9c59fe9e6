// gyre::data::DistributedBatchSampler and gyre::data::Loader: an epoch's batches of indices, and
// the threads that assemble them ahead of the training loop.
//
// The loader's bookkeeping, under mu_: batch i is handed to a worker only while
// i < returned_ + prefetch, so the batches started and not yet returned never exceed prefetch,
// and they occupy distinct slots of a ring of `prefetch` slots (slot i % prefetch was last used
// by batch i - prefetch, which next() has already taken out). next() takes batch returned_ from
// its slot, waiting while a worker assembles it, or assembles it itself when none has started it.
#include <sched.h>

#include <chrono>
#include <exception>
#include <thread>

#include "common/mutex.h"
#include "common/check.h"
#include "gyre/torch/data.h"

namespace gyre::data {

DistributedBatchSampler::DistributedBatchSampler(std::int64_t datasetSize, int ranks, int rank, std::int64_t batch,
                                                 BatchSamplerOptions options)
    : batch_(batch),
      options_(options),
      sampler_(datasetSize, ranks, rank,
               gyre::torch::DistributedSamplerOptions{
                   .shuffle = options.shuffle, .seed = options.seed, .dropLast = options.dropLast}) {
  GYRE_USAGE_CHECK(batch >= 1, "DistributedBatchSampler: batch must be at least 1, not ", batch);
}

std::vector<std::vector<std::int64_t>> DistributedBatchSampler::batches() const {
  const std::vector<std::int64_t> mine = sampler_.indices();
  const std::int64_t count = size();
  const auto total = static_cast<std::int64_t>(mine.size());
  std::vector<std::vector<std::int64_t>> out;
  out.reserve(static_cast<std::size_t>(count));
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t first = b * batch_;
    const std::int64_t last = std::min(first + batch_, total);
    out.emplace_back(mine.begin() + first, mine.begin() + last);
  }
  return out;
}

namespace {

class InMemory final : public Source {
 public:
  explicit InMemory(Dataset data) : data_(std::move(data)) {
    GYRE_USAGE_CHECK(data_.images.defined() && data_.labels.defined(), "Loader: the data set has no tensors");
    GYRE_USAGE_CHECK(data_.images.size(0) == data_.labels.size(0), "Loader: the data set has ",
                     data_.images.size(0), " images but ", data_.labels.size(0), " labels");
  }
  std::int64_t size() const override { return data_.size(); }
  Batch gather(const std::vector<std::int64_t>& indices, std::int64_t index) const override {
    return gatherBatch(data_, indices, index);
  }

 private:
  const Dataset data_;
};

}  // namespace

std::shared_ptr<const Source> inMemory(Dataset data) { return std::make_shared<InMemory>(std::move(data)); }

class Loader::Impl {
 public:
  Impl(std::shared_ptr<const Source> source, std::vector<std::vector<std::int64_t>> batches, LoaderOptions options)
      : source_(std::move(source)), batches_(std::move(batches)), options_(std::move(options)) {
    GYRE_USAGE_CHECK(source_ != nullptr, "Loader: no source");
    GYRE_USAGE_CHECK(options_.workers >= 0, "Loader: workers must not be negative, not ", options_.workers);
    GYRE_USAGE_CHECK(options_.prefetch >= 1, "Loader: prefetch must be at least 1, not ", options_.prefetch);
    GYRE_USAGE_CHECK(!options_.pin || ::torch::cuda::is_available(),
                     "Loader: pin needs a libtorch with CUDA (pinned memory speeds up copies to a GPU); this one "
                     "has none");
    if (options_.workers == 0) return;
    slots_.resize(static_cast<std::size_t>(options_.prefetch));
    const int threads = static_cast<int>(
        std::min<std::int64_t>(options_.workers, static_cast<std::int64_t>(batches_.size())));
    try {
      for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
    } catch (...) {  // no thread to be had: the ones started must not outlive this constructor
      stopAndJoin();
      throw;
    }
  }

  ~Impl() { stopAndJoin(); }

  Batch next() {
    const auto begin = std::chrono::steady_clock::now();
    Batch batch = take();
    lastWait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    totalWait_ += lastWait_;
    return batch;
  }

  std::int64_t size() const { return static_cast<std::int64_t>(batches_.size()); }
  std::int64_t returned() const {
    MutexLock lock(mu_);
    return returned_;
  }
  double waitSeconds() const { return totalWait_; }
  double lastWaitSeconds() const { return lastWait_; }

 private:
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
  };

  void stopAndJoin() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    room_.notifyAll();
    for (std::thread& t : threads_) t.join();
  }

  Batch assemble(std::int64_t i) {
    if (options_.onAssemble) options_.onAssemble(i);
    Batch batch = source_->gather(batches_[static_cast<std::size_t>(i)], i);
    applyTransforms(batch, options_.transforms, options_.seed);
    if (options_.pin) {
      batch.images = batch.images.pin_memory();
      batch.labels = batch.labels.pin_memory();
    }
    return batch;
  }

  Batch take() {
    if (error_) std::rethrow_exception(error_);
    if (options_.workers == 0) {
      std::int64_t i = 0;
      {
        MutexLock lock(mu_);  // for returned() alone: no other thread here
        if (returned_ >= size()) return {};
        i = returned_++;
      }
      try {
        return assemble(i);
      } catch (...) {
        error_ = std::current_exception();
        throw;
      }
    }
    UniqueLock lock(mu_);
    if (returned_ >= size()) return {};
    const std::int64_t i = returned_;
    Slot& slot = slots_[static_cast<std::size_t>(i % options_.prefetch)];
    if (!slot.ready && next_ <= i) {
      // No thread has started it (they are behind, or have not run yet): assembling it here costs
      // no more than waiting for one would. returned_ moves on once it is done, so the threads
      // stay within `prefetch` of it meanwhile.
      next_ = i + 1;
      lock.unlock();
      Batch batch;
      try {
        batch = assemble(i);
      } catch (...) {
        error_ = std::current_exception();
        lock.lock();
        ++returned_;
        stop_ = true;
        throw;
      }
      lock.lock();
      ++returned_;
      lock.unlock();
      room_.notifyAll();
      return batch;
    }
    ready_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return slot.ready; });
    Slot taken = std::move(slot);
    slot = Slot{};
    ++returned_;
    if (taken.error) {
      error_ = taken.error;
      stop_ = true;  // no point assembling more
    }
    lock.unlock();
    room_.notifyAll();
    if (error_) std::rethrow_exception(error_);
    return std::move(taken.batch);
  }

  void work() {
    // SCHED_BATCH: the training thread's priority, but a wake-up (next() making room) does not
    // preempt it; without this, handing a batch over cost the training thread its core for about a
    // millisecond whenever the cores were busy. Best effort: the policy needs no privilege.
#ifdef SCHED_BATCH
    sched_param param{};
    param.sched_priority = 0;
    (void)::sched_setscheduler(0, SCHED_BATCH, &param);  // 0: this thread
#endif
    UniqueLock lock(mu_);
    for (;;) {
      room_.wait(mu_, [&]() GYRE_REQUIRES(mu_) {
        return stop_ || next_ >= size() || next_ < returned_ + options_.prefetch;
      });
      if (stop_ || next_ >= size()) return;
      const std::int64_t i = next_++;
      lock.unlock();
      Slot done;
      try {
        done.batch = assemble(i);
      } catch (...) {
        done.error = std::current_exception();
      }
      done.ready = true;
      lock.lock();
      slots_[static_cast<std::size_t>(i % options_.prefetch)] = std::move(done);
      ready_.notifyAll();
    }
  }

  const std::shared_ptr<const Source> source_;
  const std::vector<std::vector<std::int64_t>> batches_;
  const LoaderOptions options_;

  mutable Mutex mu_;
  CondVar room_;   // workers: a batch may start, or stop
  CondVar ready_;  // next(): a slot was filled
  std::vector<Slot> slots_ GYRE_GUARDED_BY(mu_);
  std::int64_t next_ GYRE_GUARDED_BY(mu_) = 0;      // the next batch a worker starts
  std::int64_t returned_ GYRE_GUARDED_BY(mu_) = 0;  // batches next() returned (or threw for)
  bool stop_ GYRE_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;

  // The caller's thread only.
  std::exception_ptr error_;
  double totalWait_ = 0;
  double lastWait_ = 0;
};

Loader::Loader(Dataset data, std::vector<std::vector<std::int64_t>> batches, LoaderOptions options)
    : Loader(inMemory(std::move(data)), std::move(batches), std::move(options)) {}

Loader::Loader(std::shared_ptr<const Source> source, std::vector<std::vector<std::int64_t>> batches,
               LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(source), std::move(batches), std::move(options))) {}

Loader::Loader(std::shared_ptr<const Source> source, const DistributedBatchSampler& sampler, LoaderOptions options)
    : Loader(std::move(source), sampler.batches(), std::move(options)) {}

Loader::Loader(Dataset data, const DistributedBatchSampler& sampler, LoaderOptions options)
    : Loader(std::move(data), sampler.batches(), std::move(options)) {}

Loader::~Loader() = default;
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;

Batch gatherBatch(const Dataset& data, const std::vector<std::int64_t>& indices, std::int64_t index) {
  // from_blob over the caller's list, which outlives the call; index_select copies what it selects.
  const ::torch::Tensor at = ::torch::from_blob(const_cast<std::int64_t*>(indices.data()),
                                                {static_cast<std::int64_t>(indices.size())}, ::torch::kInt64);
  Batch batch;
  batch.images = data.images.index_select(0, at);
  batch.labels = data.labels.index_select(0, at);
  batch.index = index;
  return batch;
}

Batch Loader::next() { return impl_->next(); }
std::int64_t Loader::size() const { return impl_->size(); }
std::int64_t Loader::returned() const { return impl_->returned(); }
double Loader::waitSeconds() const { return impl_->waitSeconds(); }
double Loader::lastWaitSeconds() const { return impl_->lastWaitSeconds(); }

}  // namespace gyre::data
