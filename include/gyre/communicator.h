// A group of ranks that run collectives together.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gyre/shared_memory.h"
#include "gyre/store.h"
#include "gyre/types.h"
#include "gyre/work.h"

namespace gyre {

struct CommunicatorOptions {
  // Default time-out of every operation (60 s). GYRE_TIMEOUT_MS sets it through init().
  Timeout timeout{std::chrono::seconds(60)};
  // How long creating the communicator may take to meet every peer (GYRE_START_TIMEOUT_MS). Zero:
  // `timeout`.
  Timeout startTimeout{0};
  // Transport between pairs of ranks (GYRE_TRANSPORT). kAuto: shared memory on one host, TCP
  // between hosts; kMpi: MPI messages, under mpirun in a build with MPI (docs/transports.md).
  Transport transport = Transport::kAuto;
  // Where to listen for peers: an interface name ("eth0"), or an IPv4/IPv6 address. Empty: the
  // address this host uses to reach the TCP store, or loopback for in-process and file stores.
  std::string interface;
  // The job secret every connection proves it knows. Empty is allowed only for tests.
  std::string secret;
  // Fingerprint every collective across ranks and turn a mismatch into InvalidArgument
  // (GYRE_DEBUG_COLLECTIVES=1).
  bool debugCollectives = false;
  // Name of this communicator in the store; communicators created on the same store at the same
  // time need different names.
  std::string name = "world";

  // Tuning (init() reads these from GYRE_SPIN_US, GYRE_SHM_RING_BYTES, GYRE_COST_MODEL).
  // How long a waiting rank spins, yielding its core, before it sleeps.
  int spinMicros = 50;
  // Bytes of each shared-memory ring (one per direction per pair of ranks on a host).
  std::size_t shmRingBytes = 4 << 20;
  // "alpha_us,beta_GBps,gamma_GBps" to fix the cost model of `auto`; empty: measure it.
  std::string costModel;
};

struct AllreduceOptions {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  Timeout timeout{0};
};

struct BroadcastOptions {
  DataType dtype = DataType::kFloat32;
  int root = 0;
  BroadcastAlgorithm algorithm = BroadcastAlgorithm::kAuto;
  Timeout timeout{0};
};

struct ReduceOptions {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  Timeout timeout{0};
};

// Allgather(v), gather, scatter, alltoall(v) and reduce-scatter share these.
struct CollectiveOptions {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // reduce-scatter only
  int root = 0;                  // gather and scatter only
  Timeout timeout{0};
};

struct BarrierOptions {
  Timeout timeout{0};
};

// Point-to-point messages between a pair of ranks arrive in the order they were sent. The tag
// and the byte count travel with the message; a receive whose tag or count differs from the
// message that arrives fails with InvalidArgument.
struct P2POptions {
  DataType dtype = DataType::kFloat32;
  int tag = 0;
  Timeout timeout{0};
};

// A group of `size` ranks, each holding one Communicator.
//
// Buffers are plain memory: `count` elements of the options' dtype. Collective calls must be
// made in the same order with matching arguments on every rank (debug mode checks this).
// "In place": pass the same pointer as input and output for allreduce; for allgather pass
// input == output + rank * count; for reduce-scatter, output == input + rank * count.
//
// Thread-safety: calls may come from several threads; they run one at a time, in the order
// they were submitted. Blocking calls wait for the async calls submitted before them.
// Errors: TimeoutError, PeerLostError (the communicator is then broken: every later call
// throws), InvalidArgument for bad arguments (the communicator stays usable).
class Communicator {
 public:
  // Connects to every other rank through the store. Blocks until all `size` ranks have called it
  // with the same name, or the time-out passes.
  static std::shared_ptr<Communicator> create(std::shared_ptr<Store> store, int rank, int size,
                                              CommunicatorOptions options = {});

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const CommunicatorOptions& options() const;
  // Each rank's host as an index, in rank order: ranks with the same index share a kernel and
  // memory (and talk over shared memory). Hosts are numbered in the order of their lowest rank.
  // Never blocks.
  std::vector<int> hostIndices() const;

  // Collective: ranks with the same color form a new communicator, ordered by (key, old rank).
  // A negative color returns null (the rank joins no group).
  std::shared_ptr<Communicator> split(int color, int key);

  void allreduce(const void* input, void* output, std::size_t count, const AllreduceOptions& o = {});
  void broadcast(void* buffer, std::size_t count, const BroadcastOptions& o = {});
  // `output` is written on the root only (may be null elsewhere).
  void reduce(const void* input, void* output, std::size_t count, const ReduceOptions& o = {});
  // output holds size() * count elements, rank r's input at r * count.
  void allgather(const void* input, void* output, std::size_t count, const CollectiveOptions& o = {});
  // Rank r contributes counts[r] elements; output holds their sum, in rank order.
  void allgatherv(const void* input, void* output, std::span<const std::size_t> counts,
                  const CollectiveOptions& o = {});
  // input holds size() * count elements; rank r receives the reduction of every rank's block r.
  void reduceScatter(const void* input, void* output, std::size_t count, const CollectiveOptions& o = {});
  // The root's output holds size() * count elements.
  void gather(const void* input, void* output, std::size_t count, const CollectiveOptions& o = {});
  // The root's input holds size() * count elements; rank r receives block r.
  void scatter(const void* input, void* output, std::size_t count, const CollectiveOptions& o = {});
  // Block r of input (count elements) goes to rank r; output block s comes from rank s.
  void alltoall(const void* input, void* output, std::size_t count, const CollectiveOptions& o = {});
  // Blocks are laid out back to back in rank order with the given counts.
  void alltoallv(const void* input, std::span<const std::size_t> sendCounts, void* output,
                 std::span<const std::size_t> recvCounts, const CollectiveOptions& o = {});
  void barrier(const BarrierOptions& o = {});
  void send(const void* buffer, std::size_t count, int dst, const P2POptions& o = {});
  void recv(void* buffer, std::size_t count, int src, const P2POptions& o = {});
  // A send to `dst` and a receive from `src` progressed together (MPI_Sendrecv): two ranks that
  // send to each other at once cannot block each other, whatever the sizes, as a send followed
  // by a receive can once the transport's buffers are full. Either half may be left out (dst or
  // src -1). Each half is an ordinary message: a recv or send on the peer matches it. The message
  // received must have o.tag and recvCount elements; otherwise InvalidArgument, and the
  // communicator is broken (the rest of the message was not read).
  void sendRecv(const void* sendBuffer, std::size_t sendCount, int dst, void* recvBuffer, std::size_t recvCount,
                int src, const P2POptions& o = {});
  // Any number of sends and receives progressed together in one run (torch.distributed's
  // batch_isend_irecv, Megatron's send_forward_backward_recv_forward_backward): sendRecv with
  // several of each. Messages between two ranks are matched in order, so two ranks must list the
  // messages they exchange in the same order; each is an ordinary message (send and recv on the
  // peer match it). Every received message must have o.tag and its count; otherwise
  // InvalidArgument, and the communicator is broken.
  void exchange(std::span<const P2PMessage> sends, std::span<const P2PMessage> recvs, const P2POptions& o = {});

  std::shared_ptr<Work> allreduceAsync(const void* input, void* output, std::size_t count,
                                       const AllreduceOptions& o = {});
  std::shared_ptr<Work> broadcastAsync(void* buffer, std::size_t count, const BroadcastOptions& o = {});
  std::shared_ptr<Work> reduceAsync(const void* input, void* output, std::size_t count,
                                    const ReduceOptions& o = {});
  std::shared_ptr<Work> allgatherAsync(const void* input, void* output, std::size_t count,
                                       const CollectiveOptions& o = {});
  std::shared_ptr<Work> allgathervAsync(const void* input, void* output, std::span<const std::size_t> counts,
                                        const CollectiveOptions& o = {});
  std::shared_ptr<Work> reduceScatterAsync(const void* input, void* output, std::size_t count,
                                           const CollectiveOptions& o = {});
  std::shared_ptr<Work> gatherAsync(const void* input, void* output, std::size_t count,
                                    const CollectiveOptions& o = {});
  std::shared_ptr<Work> scatterAsync(const void* input, void* output, std::size_t count,
                                     const CollectiveOptions& o = {});
  std::shared_ptr<Work> alltoallAsync(const void* input, void* output, std::size_t count,
                                      const CollectiveOptions& o = {});
  std::shared_ptr<Work> alltoallvAsync(const void* input, std::span<const std::size_t> sendCounts, void* output,
                                       std::span<const std::size_t> recvCounts, const CollectiveOptions& o = {});
  std::shared_ptr<Work> barrierAsync(const BarrierOptions& o = {});

  // Collective: `bytes` of memory mapped by every rank (shared_memory.h), or null on every rank
  // when the ranks do not all reach each other over shared memory (other hosts, TCP or MPI
  // transport) or the memory could not be had (/dev/shm full). Nothing is left in /dev/shm
  // once every rank has mapped it.
  std::shared_ptr<SharedMemory> allocateShared(std::size_t bytes);
  std::shared_ptr<Work> sendAsync(const void* buffer, std::size_t count, int dst, const P2POptions& o = {});
  std::shared_ptr<Work> recvAsync(void* buffer, std::size_t count, int src, const P2POptions& o = {});
  std::shared_ptr<Work> sendRecvAsync(const void* sendBuffer, std::size_t sendCount, int dst, void* recvBuffer,
                                      std::size_t recvCount, int src, const P2POptions& o = {});
  std::shared_ptr<Work> exchangeAsync(std::span<const P2PMessage> sends, std::span<const P2PMessage> recvs,
                                      const P2POptions& o = {});

  class Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre
