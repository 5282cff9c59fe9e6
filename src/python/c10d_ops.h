// The operations of torch.distributed's backend "gyre" (process_group.h), each checked where it
// is called and turned into a run on a gyre Communicator: what the c10d API asks (lists of
// tensors, split sizes, root ranks, ReduceOps) in gyre's terms (buffers, counts, options).
// A wrong argument is a c10::Error, Python's RuntimeError, naming the call, before anything runs.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <functional>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::python::ops {

using Run = std::function<void(Communicator&)>;

// An operation ready to queue: the tensors its Work returns, and its run.
struct Op {
  std::vector<at::Tensor> outputs;
  Run run;
};

// A CPU tensor's memory as gyre's collectives take it: the tensor's own when it is contiguous,
// else a contiguous copy made when the operation runs (of its values when `copyIn`), which
// finish() writes back (when `copyOut`).
class Staged {
 public:
  Staged() = default;
  Staged(at::Tensor user, bool copyIn, bool copyOut = true)
      : user_(std::move(user)), copyIn_(copyIn), copyOut_(copyOut) {}
  // At the start of the run: the tensor's values as they are then.
  void begin();
  void* data() const { return work_.data_ptr(); }
  std::size_t bytes() const { return user_.nbytes(); }
  std::size_t count() const { return static_cast<std::size_t>(user_.numel()); }
  const at::Tensor& tensor() const { return work_; }
  // Writes a copy's values back into the caller's tensor (nothing when there was no copy).
  void finish();

 private:
  at::Tensor user_;
  at::Tensor work_;
  bool copyIn_ = true;
  bool copyOut_ = true;
};

// begin() on each.
void beginAll(std::vector<Staged>& staged);

// Checks that `t` is a dense CPU tensor, then stages it.
Staged stage(const at::Tensor& t, const char* call, bool copyIn, bool copyOut = true);
// The one tensor of a per-device list (c10d's lists hold one tensor per device; CPU has one).
at::Tensor singleTensor(const std::vector<at::Tensor>& tensors, const char* call);
void checkPeer(int peer, int rank, int size, const char* call);

Op broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts, int size);
Op allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
Op allreduceCoalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts);
Op reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts, int rank, int size);
Op allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
             const c10d::AllgatherOptions& opts, int size);
Op allgatherBase(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts, int size);
Op allgatherCoalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                      const c10d::AllgatherOptions& opts, int size);
Op gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
          const c10d::GatherOptions& opts, int rank, int size);
Op scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
           const c10d::ScatterOptions& opts, int rank, int size);
Op reduceScatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                 const c10d::ReduceScatterOptions& opts, int size);
Op reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts, int size);
Op alltoallBase(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                const std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts, int size);
Op alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts,
            int size);
Op barrier(const c10d::BarrierOptions& opts);

}  // namespace gyre::python::ops
