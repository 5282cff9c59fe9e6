// The Work handle's implementation: completion flag, error, and a condition variable.
#pragma once

#include "common/mutex.h"
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
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ GYRE_GUARDED_BY(mu_) = false;
  std::exception_ptr error_ GYRE_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point started_ GYRE_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point finished_ GYRE_GUARDED_BY(mu_);
};

}  // namespace gyre::engine
