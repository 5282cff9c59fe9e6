#include "engine/work.h"

namespace gyre::engine {

bool WorkImpl::isCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool WorkImpl::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout.count() < 0) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::exception_ptr WorkImpl::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::chrono::steady_clock::time_point WorkImpl::startedAt() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

std::chrono::steady_clock::time_point WorkImpl::finishedAt() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void WorkImpl::start() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  started_ = now;
}

void WorkImpl::complete(std::exception_ptr error) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ == std::chrono::steady_clock::time_point{}) started_ = now;
    finished_ = now;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace gyre::engine
