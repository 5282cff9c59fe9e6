// --max-connections for cpp-httplib: the task queue its accept loop hands each connection to.
// A connection is served on a thread of its own for its keep-alive life, at most maxConnections at
// once; one more is handed to one of a few overflow threads, where overflowing() is true, so the
// server's pre-routing handler answers it 503 (naming the limit) before reading its body, and
// closes it. When those are busy too, the accept loop waits (new connections wait in, or are
// refused by, the kernel's backlog): a flood of connections costs bounded threads and memory.
// (httplib's own ThreadPool queues every connection beyond its threads, without bound, and
// answers it only when a thread frees.)
#pragma once

#include <httplib.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace gyre::serve {

class ConnectionPool : public httplib::TaskQueue {
 public:
  static constexpr int kOverflowThreads = 2;
  static constexpr int kOverflowQueue = 16;

  explicit ConnectionPool(int maxConnections);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> fn) override GYRE_EXCLUDES(mu_);
  void shutdown() override GYRE_EXCLUDES(mu_);

  // On the calling thread: the connection it serves is beyond --max-connections.
  static bool overflowing();
  // Connections answered 503 for the limit so far.
  std::uint64_t refused() const GYRE_EXCLUDES(mu_);

 private:
  void work(bool overflow) GYRE_EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar jobsReady_;      // a connection for the connection threads
  CondVar overflowReady_;  // one for the overflow threads
  CondVar room_;           // room in the overflow queue
  std::deque<std::function<void()>> jobs_ GYRE_GUARDED_BY(mu_);
  std::deque<std::function<void()>> overflow_ GYRE_GUARDED_BY(mu_);
  int idle_ GYRE_GUARDED_BY(mu_) = 0;  // connection threads waiting for a connection
  bool shutdown_ GYRE_GUARDED_BY(mu_) = false;
  std::uint64_t refused_ GYRE_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace gyre::serve
