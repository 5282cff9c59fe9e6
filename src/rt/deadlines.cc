#include "rt/deadlines.h"

#include "gyre/errors.h"

namespace gyre::rt::detail {

Deadlines::~Deadlines() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notifyAll();
  if (thread_.joinable()) thread_.join();
}

void Deadlines::watch(const std::shared_ptr<Promise>& promise, std::chrono::milliseconds timeout,
                      std::string what) {
  {
    MutexLock lock(mu_);
    // Calls answered long before their deadline would otherwise stay queued until it passed: when
    // the queue has doubled since the last look, it keeps only the calls still waiting.
    if (due_.size() >= 1024 && due_.size() >= 2 * keptAtPurge_) {
      std::vector<Entry> waiting;
      while (!due_.empty()) {
        if (auto p = due_.top().promise.lock(); p && !p->ready()) waiting.push_back(due_.top());
        due_.pop();
      }
      for (Entry& e : waiting) due_.push(std::move(e));
      keptAtPurge_ = due_.size();
    }
    due_.push({std::chrono::steady_clock::now() + timeout, promise,
               "gyre::rt: " + what + " did not answer within " + std::to_string(timeout.count()) + " ms"});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notifyAll();
}

void Deadlines::run() {
  UniqueLock lock(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      cv_.wait(mu_);
      continue;
    }
    const auto at = due_.top().at;
    if (std::chrono::steady_clock::now() < at) {
      cv_.waitUntil(mu_, at);
      continue;
    }
    Entry e = due_.top();
    due_.pop();
    lock.unlock();
    if (auto p = e.promise.lock(); p && !p->ready())
      p->setError(std::make_exception_ptr(TimeoutError(e.message)));
    lock.lock();
  }
}

}  // namespace gyre::rt::detail
