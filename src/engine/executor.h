// Runs a communicator's operations one at a time, in the order they were submitted.
//
// Async operations run on a worker thread (started on first use). A blocking operation runs on
// the caller's thread as soon as everything submitted before it has finished, so the common case
// (nothing in flight) costs no thread hand-off at all.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "common/mutex.h"
#include "engine/work.h"

namespace gyre::engine {

class Executor {
 public:
  Executor() = default;
  // Waits for queued operations (each is bounded by its own time-out), then stops the worker.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs fn on this thread in its turn; rethrows what fn throws.
  void runBlocking(const std::function<void()>& fn) GYRE_EXCLUDES(mu_);
  // Queues fn; the Work completes with fn's exception, if any.
  std::shared_ptr<Work> submit(std::function<void()> fn) GYRE_EXCLUDES(mu_);

 private:
  struct Task {
    std::uint64_t ticket;
    std::function<void()> fn;
    std::shared_ptr<WorkImpl> work;
  };

  void workerLoop() GYRE_EXCLUDES(mu_);
  void finishTurn() GYRE_EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::uint64_t nextTicket_ GYRE_GUARDED_BY(mu_) = 0;  // handed to the next submission
  std::uint64_t serving_ GYRE_GUARDED_BY(mu_) = 0;     // the ticket allowed to run now
  std::deque<Task> queue_ GYRE_GUARDED_BY(mu_);
  bool stop_ GYRE_GUARDED_BY(mu_) = false;
  std::thread worker_ GYRE_GUARDED_BY(mu_);  // started under mu_; joined by the destructor
};

}  // namespace gyre::engine
