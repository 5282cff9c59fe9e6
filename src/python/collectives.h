// gyre._C's collectives on torch tensors (gyre.allreduce, ...) and their asynchronous handles.
#pragma once

#include <torch/extension.h>

#include <memory>

#include "python/coordination.h"

namespace gyre::python {

// An asynchronous collective (gyre.allreduce_async, ...): its call queued on the process set's
// Coordinator, which coordinates it with the other ranks and runs it; `output` is filled then.
class Handle {
 public:
  Handle(std::shared_ptr<Coordinator::Task> task, std::shared_ptr<at::Tensor> output)
      : task_(std::move(task)), output_(std::move(output)) {}
  // A handle dropped unwaited waits for its call: it still writes the tensors it was given.
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  // True once the collective has finished; never blocks.
  bool poll() const { return task_->done(); }
  // Waits for it (its own time-out bounds the wait) and returns its output; rethrows a failure
  // (a mismatch with the other ranks' calls among them). Called with the GIL released.
  at::Tensor wait();

 private:
  std::shared_ptr<Coordinator::Task> task_;
  std::shared_ptr<at::Tensor> output_;
};

void bindCollectives(pybind11::module_& m);
// gyre._C.join_round (join.cc): hvd.join() on a rank with no data left.
void bindJoin(pybind11::module_& m);

}  // namespace gyre::python
