// An in-process Mesh for ranks that are threads, so collective algorithms can be tested without
// a real transport. It keeps the contract of transport/mesh.h to the letter, and is strict where
// the contract leaves room, so an algorithm that passes here has nothing to unlearn:
//  - one byte FIFO per ordered pair of ranks, bounded (64 KiB by default): an algorithm that
//    would need unbounded buffering on a real transport deadlocks here too, and the deadline
//    turns that into TimeoutError;
//  - every send op is one message, which the peer must take with exactly one receive op of the
//    same size (the shared-memory transport frames messages); a receive of another size throws
//    ProtocolError naming both sizes. Zero-byte ops send nothing;
//  - ops with the same peer and direction (send / receive) run in list order, the rest at once;
//  - `after` limits an op to bytes [0, ops[after].done); it must name an earlier op with at
//    least as many bytes (else InvalidArgument), and the receive side of a blocked op leaves
//    its bytes in the FIFO (the sender then stalls, as on a real transport);
//  - kRecvReduce reduces whole elements only, with reduce::apply and `other`;
//  - a peer equal to the own rank, a null buffer with bytes > 0 and a reduce whose byte count
//    is not a multiple of the element size are rejected with InvalidArgument.
// abort() breaks every mesh of the network: their pending and later run()s throw PeerLostError
// naming the lost rank. A TimeoutError breaks only the mesh that raised it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collectives/context.h"
#include "collectives/cost_model.h"
#include "collectives/topology.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "transport/mesh.h"

namespace gyre::test {

inline constexpr std::size_t kFakeFifoCapacity = 64 * 1024;

// The FIFOs between `size` in-process ranks. Thread-safe.
class FakeNetwork {
 public:
  explicit FakeNetwork(int size, std::size_t capacity = kFakeFifoCapacity);
  ~FakeNetwork();
  FakeNetwork(const FakeNetwork&) = delete;
  FakeNetwork& operator=(const FakeNetwork&) = delete;

  int size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  // Bytes sent but not yet received, over every pair: 0 after ranks that agree on their ops.
  std::size_t pendingBytes() const;
  // Bytes sent so far, over every pair (a counter for tests of the traffic an algorithm makes).
  std::size_t sentBytes() const;
  // Bytes sent so far from src to dst.
  std::size_t sentBytes(int src, int dst) const;

  // Non-blocking halves of a transfer; each returns the bytes moved and wakes the other end.
  // `message` is the size of the op's whole message and `offset` how much of it has moved.
  std::size_t write(int src, int dst, const std::byte* data, std::size_t bytes, std::size_t message,
                    std::size_t offset);
  // Reads at most `bytes`, rounded down to a multiple of `unit`; throws ProtocolError when the
  // message waiting in the FIFO has another size than `message`.
  std::size_t read(int src, int dst, std::byte* data, std::size_t bytes, std::size_t unit,
                   std::size_t message, std::size_t offset);

  // A rank's doorbell: the epoch changes whenever a FIFO it reads or writes changes, or the
  // network breaks. wait() returns false at the deadline.
  std::uint64_t epoch(int rank) const;
  bool wait(int rank, std::uint64_t seen, Clock::time_point deadline) const;

  // Breaks the network: every rank's run() throws PeerLostError(reason, lostRank).
  void breakAll(int lostRank, const std::string& reason);
  // Throws the PeerLostError of breakAll, if it was called.
  void throwIfBroken() const;

 private:
  struct Fifo;
  struct Doorbell;
  Fifo& fifo(int src, int dst) const;
  void ring(int rank) const;

  int size_;
  std::size_t capacity_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
  std::vector<std::unique_ptr<Doorbell>> doorbells_;
  struct Failure;
  std::unique_ptr<Failure> failure_;
};

class FakeMesh final : public transport::Mesh {
 public:
  // hosts: the host index of every rank (Mesh::hostIndices); empty: all on one host.
  FakeMesh(std::shared_ptr<FakeNetwork> network, int rank, std::vector<int> hosts = {});

  int rank() const override { return rank_; }
  int size() const override { return network_->size(); }
  Transport transportTo(int) const override { return Transport::kShm; }
  std::string hostOf(int rank) const override { return "thread-" + std::to_string(rank); }
  std::span<const int> hostIndices() const override { return hosts_; }
  void run(std::span<transport::Op> ops, Deadline deadline) override;
  void abort(int lostRank, const std::string& reason) override;

 private:
  void validate(std::span<transport::Op> ops) const;

  std::shared_ptr<FakeNetwork> network_;
  int rank_;
  std::vector<int> hosts_;
  std::vector<std::byte> staging_;  // received bytes on their way into a reduce
  std::string brokenBy_;            // the TimeoutError that broke this mesh
};

// `size` ranks on one FakeNetwork, each with the Scratch and CostModel a Context needs, and a
// thread of its own. The meshes, scratch buffers, models and threads persist across run()
// calls, as in a communicator. Not thread-safe: one run() at a time.
class FakeJob {
 public:
  // hosts: the host index of every rank, numbered in the order of their lowest rank (each
  // context gets the topology they make); empty: all on one host.
  explicit FakeJob(int size, std::size_t capacity = kFakeFifoCapacity, std::vector<int> hosts = {});
  ~FakeJob();
  FakeJob(const FakeJob&) = delete;
  FakeJob& operator=(const FakeJob&) = delete;

  int size() const { return static_cast<int>(meshes_.size()); }
  FakeNetwork& network() { return *network_; }
  FakeMesh& mesh(int rank) { return *meshes_[static_cast<std::size_t>(rank)]; }
  collectives::CostModel& cost(int rank) { return costs_[static_cast<std::size_t>(rank)]; }
  collectives::Topology& topology(int rank) { return topologies_[static_cast<std::size_t>(rank)]; }

  // Runs fn(context, rank) on every rank's thread, each with a deadline `timeout` from now, and
  // returns when all are done. A rank whose fn throws aborts its mesh (so the others fail fast
  // instead of waiting out the deadline) and is reported as a gtest failure naming the rank, as
  // are the others' errors.
  using Task = std::function<void(collectives::Context&, int rank)>;
  void run(const Task& fn, std::chrono::milliseconds timeout = std::chrono::seconds(30)) GYRE_EXCLUDES(mu_);

 private:
  void serve(int rank) GYRE_EXCLUDES(mu_);

  std::shared_ptr<FakeNetwork> network_;
  std::vector<std::unique_ptr<FakeMesh>> meshes_;
  std::vector<collectives::Scratch> scratch_;
  std::vector<collectives::CostModel> costs_;
  std::vector<collectives::Topology> topologies_;

  Mutex mu_;
  CondVar changed_;
  std::uint64_t generation_ GYRE_GUARDED_BY(mu_) = 0;  // bumped by run() for each task
  int busy_ GYRE_GUARDED_BY(mu_) = 0;                  // ranks still working on the current task
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  const Task* task_ GYRE_GUARDED_BY(mu_) = nullptr;
  Deadline deadline_ GYRE_GUARDED_BY(mu_) = Deadline::never();
  std::vector<std::thread> threads_;
};

}  // namespace gyre::test
