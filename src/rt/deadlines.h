// The time-outs of calls (CallOptions::timeout, ActorOptions::callTimeout): one thread that fails
// each call's future with TimeoutError when its deadline passes before the answer. The call may
// still run; its answer is then dropped (a future is set once).
#pragma once

#include <chrono>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "gyre/rt/future.h"

namespace gyre::rt::detail {

class Deadlines {
 public:
  Deadlines() = default;
  ~Deadlines();
  Deadlines(const Deadlines&) = delete;
  Deadlines& operator=(const Deadlines&) = delete;

  // Fails `promise` with TimeoutError("gyre::rt: WHAT did not answer within T ms") unless it is set
  // within `timeout`. Holds it weakly: a future dropped meanwhile costs nothing.
  void watch(const std::shared_ptr<Promise>& promise, std::chrono::milliseconds timeout, std::string what)
      GYRE_EXCLUDES(mu_);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point at;
    std::weak_ptr<Promise> promise;
    std::string message;
    bool operator>(const Entry& o) const { return at > o.at; }
  };
  void run() GYRE_EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> due_ GYRE_GUARDED_BY(mu_);
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  std::size_t keptAtPurge_ GYRE_GUARDED_BY(mu_) = 0;  // calls left waiting at the last purge of answered ones
  std::thread thread_ GYRE_GUARDED_BY(mu_);           // started by the first watch()
};

}  // namespace gyre::rt::detail
