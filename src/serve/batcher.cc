#include "serve/batcher.h"

#include <exception>
#include <utility>

namespace gyre::serve {

using Clock = std::chrono::steady_clock;

// A caller's `done` that throws fails neither the batch's other requests nor the replica.
void Batcher::answer(Request& r, ::torch::Tensor output, std::exception_ptr error) {
  try {
    r.done(std::move(output), error);
  } catch (...) {
  }
}

Batcher::Batcher(std::vector<Forward> replicas, BatchOptions options) : options_(options) {
  if (replicas.empty()) throw InvalidArgument("a Batcher needs at least one replica");
  for (Forward& f : replicas) addReplica(std::move(f));
}

Batcher::~Batcher() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  changed_.notifyAll();
  for (std::thread& t : threads) t.join();
}

int Batcher::replicas() const {
  MutexLock lock(mu_);
  return stats_.replicas;
}

void Batcher::addReplica(Forward forward) {
  MutexLock lock(mu_);
  if (stopping_) return;
  threads_.emplace_back([this, f = std::move(forward)] { serve(f); });
  ++stats_.replicas;
}

void Batcher::removeReplica() {
  {
    MutexLock lock(mu_);
    if (stats_.replicas <= 1) throw InvalidArgument("the last replica cannot be removed");
    --stats_.replicas;
    ++retiring_;
  }
  changed_.notifyAll();
}

std::future<::torch::Tensor> Batcher::submit(::torch::Tensor rows) {
  auto answer = std::make_shared<std::promise<::torch::Tensor>>();
  std::future<::torch::Tensor> future = answer->get_future();
  submit(std::move(rows), [answer](::torch::Tensor output, std::exception_ptr error) {
    if (error) answer->set_exception(error);
    else answer->set_value(std::move(output));
  });
  return future;
}

void Batcher::submit(::torch::Tensor rows, Done done) {
  if (rows.dim() < 1 || rows.size(0) < 1) throw InvalidArgument("a request has at least one row");
  Request r{std::move(rows), std::move(done), Clock::now()};
  {
    MutexLock lock(mu_);
    if (stopping_) throw QueueFull("the server is stopping");
    if (static_cast<int>(queue_.size()) >= options_.maxQueue)
      throw QueueFull("all " + std::to_string(options_.maxQueue) + " places of the queue are taken (--max-queue)");
    queue_.push_back(std::move(r));
    ++stats_.queued;
  }
  changed_.notifyAll();
}

BatchStats Batcher::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

std::vector<Batcher::Request> Batcher::gather() {
  std::vector<Request> batch;
  changed_.wait(mu_, [&]() GYRE_REQUIRES(mu_) {
    return retiring_ > 0 || (!queue_.empty() && !gathering_) || (stopping_ && queue_.empty());
  });
  if (retiring_ > 0) {  // this one leaves; the queue is the others'
    --retiring_;
    return batch;
  }
  if (queue_.empty()) return batch;
  gathering_ = true;
  const ::torch::IntArrayRef shape = queue_.front().rows.sizes().slice(1);
  const std::vector<std::int64_t> rowShape(shape.begin(), shape.end());
  const Clock::time_point deadline = queue_.front().arrival + options_.wait;
  std::int64_t rows = 0;
  while (true) {
    // Take what fits from the front; a request of another row shape waits for the next batch.
    while (!queue_.empty()) {
      const ::torch::Tensor& next = queue_.front().rows;
      const bool sameShape = next.sizes().slice(1).vec() == rowShape;
      if (!batch.empty() && (!sameShape || rows + next.size(0) > options_.maxBatchSize)) break;
      rows += next.size(0);
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      --stats_.queued;
      if (rows >= options_.maxBatchSize) break;
    }
    const bool full = rows >= options_.maxBatchSize || !queue_.empty();  // the front does not fit
    if (full || stopping_ || Clock::now() >= deadline) break;
    changed_.waitUntil(mu_, deadline, [&]() GYRE_REQUIRES(mu_) { return !queue_.empty() || stopping_; });
  }
  gathering_ = false;
  return batch;
}

void Batcher::run(const Forward& forward, std::vector<Request>& batch) {
  std::vector<::torch::Tensor> inputs;
  inputs.reserve(batch.size());
  for (const Request& r : batch) inputs.push_back(r.rows);
  try {
    ::torch::Tensor output;
    const Clock::time_point start = Clock::now();
    {
      ::torch::NoGradGuard noGrad;
      output = forward(inputs.size() == 1 ? inputs.front() : ::torch::cat(inputs));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::int64_t rows = 0;
    for (const Request& r : batch) rows += r.rows.size(0);
    if (output.dim() < 1 || output.size(0) != rows)
      throw Error("the model answered " + std::to_string(output.dim() < 1 ? 0 : output.size(0)) + " rows for " +
                  std::to_string(rows));
    std::int64_t at = 0;
    for (Request& r : batch) {
      const std::int64_t n = r.rows.size(0);
      answer(r, output.narrow(0, at, n).clone(), nullptr);
      at += n;
    }
    MutexLock lock(mu_);
    stats_.requests += batch.size();
    stats_.rows += static_cast<std::uint64_t>(rows);
    stats_.forwardSeconds += seconds;
    ++stats_.batches;
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (Request& r : batch) answer(r, {}, e);
    MutexLock lock(mu_);
    stats_.requests += batch.size();
    ++stats_.batches;
    ++stats_.failedBatches;
  }
}

void Batcher::serve(const Forward& forward) {
  // This thread computes with the threads torch::set_num_threads gave (--threads): a thread
  // OpenMP did not start has the machine's count otherwise.
  at::init_num_threads();
  while (true) {
    std::vector<Request> batch;
    {
      MutexLock lock(mu_);
      batch = gather();
      if (batch.empty()) return;
      ++stats_.busy;
      stats_.running += static_cast<int>(batch.size());
    }
    changed_.notifyAll();  // the next replica may gather
    run(forward, batch);
    MutexLock lock(mu_);
    --stats_.busy;
    stats_.running -= static_cast<int>(batch.size());
  }
}

}  // namespace gyre::serve
