#include "engine/executor.h"

namespace gyre::engine {

Executor::~Executor() {
  {
    MutexLock lock(mu_);
    cv_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return queue_.empty() && serving_ == nextTicket_; });
    stop_ = true;
  }
  cv_.notifyAll();
  if (worker_.joinable()) worker_.join();
}

void Executor::finishTurn() {
  {
    MutexLock lock(mu_);
    ++serving_;
  }
  cv_.notifyAll();
}

void Executor::runBlocking(const std::function<void()>& fn) {
  {
    MutexLock lock(mu_);
    const std::uint64_t ticket = nextTicket_++;
    cv_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return serving_ == ticket; });
  }
  try {
    fn();
  } catch (...) {
    finishTurn();
    throw;
  }
  finishTurn();
}

std::shared_ptr<Work> Executor::submit(std::function<void()> fn) {
  auto work = std::make_shared<WorkImpl>();
  {
    MutexLock lock(mu_);
    queue_.push_back(Task{nextTicket_++, std::move(fn), work});
    if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  }
  cv_.notifyAll();
  return work;
}

void Executor::workerLoop() {
  for (;;) {
    Task task;
    {
      MutexLock lock(mu_);
      cv_.wait(mu_, [&]() GYRE_REQUIRES(mu_) {
        return stop_ || (!queue_.empty() && queue_.front().ticket == serving_);
      });
      if (queue_.empty()) return;  // stop_ with nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    task.work->start();
    try {
      task.fn();
    } catch (...) {
      error = std::current_exception();
    }
    task.work->complete(error);
    finishTurn();
  }
}

}  // namespace gyre::engine
