#include "serve/connections.h"

#include <utility>

namespace gyre::serve {
namespace {

thread_local bool tOverflow = false;

}  // namespace

ConnectionPool::ConnectionPool(int maxConnections) {
  for (int i = 0; i < maxConnections; ++i) threads_.emplace_back([this] { work(false); });
  for (int i = 0; i < kOverflowThreads; ++i) threads_.emplace_back([this] { work(true); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

bool ConnectionPool::overflowing() { return tOverflow; }

std::uint64_t ConnectionPool::refused() const {
  MutexLock lock(mu_);
  return refused_;
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  bool overflow = false;
  {
    MutexLock lock(mu_);
    if (idle_ > static_cast<int>(jobs_.size())) {
      jobs_.push_back(std::move(fn));
    } else {
      // Beyond the limit: wait for room among the overflow's (the accept loop waits meanwhile).
      room_.wait(mu_, [&]() GYRE_REQUIRES(mu_) {
        return shutdown_ || static_cast<int>(overflow_.size()) < kOverflowQueue;
      });
      overflow_.push_back(std::move(fn));
      ++refused_;
      overflow = true;
    }
  }
  (overflow ? overflowReady_ : jobsReady_).notifyOne();
}

void ConnectionPool::shutdown() {
  {
    MutexLock lock(mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
  }
  jobsReady_.notifyAll();
  overflowReady_.notifyAll();
  room_.notifyAll();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void ConnectionPool::work(bool overflow) {
  tOverflow = overflow;
  while (true) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      std::deque<std::function<void()>>& queue = overflow ? overflow_ : jobs_;
      if (!overflow) ++idle_;
      (overflow ? overflowReady_ : jobsReady_).wait(mu_, [&]() GYRE_REQUIRES(mu_) { return !queue.empty() || shutdown_; });
      if (!overflow) --idle_;
      if (queue.empty()) return;  // shut down, nothing left
      fn = std::move(queue.front());
      queue.pop_front();
    }
    if (overflow) room_.notifyOne();  // the accept loop may hand over the next
    fn();
  }
}

}  // namespace gyre::serve
