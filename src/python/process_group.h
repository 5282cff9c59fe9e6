// torch.distributed's backend "gyre": a c10d::ProcessGroup whose collectives are a gyre
// Communicator's. `import gyre.torch` registers it (python/gyre/torch/distributed.py), so
// `dist.init_process_group("gyre")` and everything built on a process group (DDP,
// ZeroRedundancyOptimizer, new_group, communication hooks) run on gyre's transports.
//
// Operations run in the order they were issued, one at a time (op_queue.h says by whom). p2p
// operations issued inside batch_isend_irecv (torch's coalescing) run together as one gyre
// exchange, so two ranks that send to each other cannot block each other.
#pragma once

#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "python/c10d_ops.h"
#include "python/op_queue.h"

namespace gyre::python {

class ProcessGroupGyre final : public c10d::ProcessGroup {
 public:
  // Meets the group's other ranks through `store` (the one torch hands a backend).
  ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupGyre() override;

  const std::string getBackendName() const override { return "gyre"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

 private:
  // Queues `op`; the returned Work completes with its outputs (its future's value) or its run's
  // exception.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, ops::Op op);
  c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, at::Tensor tensor, int peer, int tag);

  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<OpQueue> queue_;
  // Inside batch_isend_irecv: the p2p operations issued so far, run as one exchange at its end;
  // a refused one (a bad peer) fails the whole batch.
  std::mutex coalesceMu_;
  bool coalescing_ = false;
  bool coalesceFailed_ = false;
  std::vector<c10::intrusive_ptr<GyreWork>> coalesced_;
  std::vector<P2PPart> coalescedParts_;
};

void bindProcessGroup(pybind11::module_& m);

}  // namespace gyre::python
