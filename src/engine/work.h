// The Work handle's implementation: completion flag, error, and a condition variable.
#pragma once

#include <condition_variable>
#include <mutex>

#include "gyre/work.h"

namespace gyre::engine {

class WorkImpl final : public Work {
 public:
  bool isCompleted() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::exception_ptr exception() const override;
  std::chrono::steady_clock::time_point startedAt() const override;
  std::chrono::steady_clock::time_point finishedAt() const override;

  // Records that the operation begins running now.
  void start();
  // Marks the work finished (error null on success) and wakes every waiter.
  void complete(std::exception_ptr error);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point finished_;
};

}  // namespace gyre::engine
