// Communicator::Impl: owns the mesh, the executor, the scratch space and the cost model, and
// runs each validated call through debug checks, the dispatcher and error context.
#pragma once

#include <vector>

#include <cstdint>
#include <memory>

#include "collectives/context.h"
#include "collectives/cost_model.h"
#include "collectives/op_desc.h"
#include "collectives/topology.h"
#include "engine/executor.h"
#include "gyre/communicator.h"
#include "transport/mesh.h"

namespace gyre {

class Communicator::Impl {
 public:
  Impl(std::shared_ptr<Store> store, int rank, int size, CommunicatorOptions options);

  int rank() const { return rank_; }
  std::vector<int> hostIndices() const {
    const auto hosts = mesh_->hostIndices();
    return {hosts.begin(), hosts.end()};
  }
  int size() const { return size_; }
  const CommunicatorOptions& options() const { return options_; }
  const std::shared_ptr<Store>& store() const { return store_; }
  std::uint64_t nextSplit() { return splits_++; }
  // Every peer is reached over shared memory (a world of one counts).
  bool allPeersShareMemory() const;

  void runBlocking(collectives::OpDesc desc);
  std::shared_ptr<Work> submit(collectives::OpDesc desc);

 private:
  void execute(const collectives::OpDesc& desc);

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  CommunicatorOptions options_;
  std::unique_ptr<transport::Mesh> mesh_;
  collectives::Scratch scratch_;
  collectives::CostModel cost_;
  collectives::Topology topology_;    // the hosts of the ranks, from the mesh
  collectives::GuardBook guardBook_;  // the call guard's bookkeeping (collectives/context.h)
  std::uint64_t sequence_ = 0;  // collectives run so far (debug fingerprints)
  std::uint64_t splits_ = 0;
  engine::Executor executor_;  // last: destroyed first, while the mesh still exists
};

}  // namespace gyre
