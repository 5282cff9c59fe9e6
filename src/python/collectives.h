// gyre._C's collectives on torch tensors (gyre.allreduce, ...) and their asynchronous handles.
#pragma once

#include <torch/extension.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::python {

// An asynchronous collective in flight (gyre.allreduce_async, ...): keeps its communicator and
// tensors alive until it has finished.
class Handle {
 public:
  Handle(std::shared_ptr<Communicator> comm, std::shared_ptr<Work> work, at::Tensor output,
         std::vector<at::Tensor> keep, double postscale);
  // A handle dropped unwaited waits for its collective: the core still writes its tensors.
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  // True once the collective has finished; never blocks.
  bool poll() const;
  // Waits for it (its own time-out bounds the wait) and returns its output; rethrows a failure.
  // Thread-safe: called with the GIL released.
  at::Tensor wait();

 private:
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Work> work_;
  at::Tensor output_;
  std::vector<at::Tensor> keep_;
  double postscale_;
  std::mutex mutex_;  // wait() against wait()
  std::atomic<bool> done_{false};
};

void bindCollectives(pybind11::module_& m);

}  // namespace gyre::python
