// The handle of an asynchronous operation.
#pragma once

#include <chrono>
#include <exception>

namespace gyre {

// Returned by every *Async call. The operation runs on the communicator's worker thread, in the
// order the calls were made; several may be in flight. The caller must keep the buffers it
// passed alive and untouched until the operation has completed.
//
// Thread-safety: every method may be called from any thread. Destroying a Work does not cancel
// the operation; the communicator keeps it alive until it finishes.
class Work {
 public:
  virtual ~Work() = default;

  // True once the operation finished, successfully or not. Never blocks.
  virtual bool isCompleted() const = 0;

  // Blocks until the operation finishes or `timeout` passes. Returns true if it finished; if it
  // failed, rethrows its exception. A negative timeout (the default) waits without limit: the
  // operation's own time-out still bounds it, so this never hangs.
  virtual bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) = 0;

  // The operation's failure, or null while it runs or after it succeeded.
  virtual std::exception_ptr exception() const = 0;

  // When the operation began and finished running on the communicator's thread (steady_clock),
  // for step timing and timelines; the clock's epoch until it has. Never blocks.
  virtual std::chrono::steady_clock::time_point startedAt() const { return {}; }
  virtual std::chrono::steady_clock::time_point finishedAt() const { return {}; }
};

}  // namespace gyre
