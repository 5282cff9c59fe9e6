#include "engine/work.h"

namespace gyre::engine {

bool WorkImpl::isCompleted() const {
  MutexLock lock(mu_);
  return done_;
}

bool WorkImpl::wait(std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  const auto done = [&]() GYRE_REQUIRES(mu_) { return done_; };
  if (timeout.count() < 0) {
    cv_.wait(mu_, done);
  } else if (!cv_.waitFor(mu_, timeout, done)) {
    return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::exception_ptr WorkImpl::exception() const {
  MutexLock lock(mu_);
  return error_;
}

std::chrono::steady_clock::time_point WorkImpl::startedAt() const {
  MutexLock lock(mu_);
  return started_;
}

std::chrono::steady_clock::time_point WorkImpl::finishedAt() const {
  MutexLock lock(mu_);
  return finished_;
}

void WorkImpl::start() {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  started_ = now;
}

void WorkImpl::complete(std::exception_ptr error) {
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    if (started_ == std::chrono::steady_clock::time_point{}) started_ = now;
    finished_ = now;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notifyAll();
}

}  // namespace gyre::engine
