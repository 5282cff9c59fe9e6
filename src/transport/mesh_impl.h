// The Mesh implementation: one control connection per peer (goodbyes, aborts, liveness) plus a
// data Channel (TCP, or shared-memory rings for peers on this host), and the progress loop.
#pragma once

#include <poll.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/socket.h"
#include "transport/channel.h"
#include "transport/control.h"
#include "transport/mesh.h"
#include "transport/shm/segment.h"

namespace gyre::transport {

struct PeerInfo {
  std::string address;   // host:port of its listener
  std::string hostname;
  std::string hostId;    // equal for ranks that can share memory
  int pid = 0;
  int mpiRank = -1;      // its MPI_COMM_WORLD rank, with the MPI transport
};

class MeshImpl final : public Mesh {
 public:
  explicit MeshImpl(const MeshOptions& options);
  ~MeshImpl() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Transport transportTo(int peer) const override;
  std::string hostOf(int rank) const override;
  std::span<const int> hostIndices() const override { return hostIndices_; }
  void run(std::span<Op> ops, Deadline deadline) override;
  void abort(int lostRank, const std::string& reason) override;
  void reportMismatch(const std::string& reason) override;

 private:
  friend std::unique_ptr<Mesh> Mesh::connect(Store& store, const MeshOptions& options);

  struct Peer {
    PeerInfo info;
    net::Fd control;
    ControlReader reader;
    std::unique_ptr<Channel> channel;
    std::unique_ptr<shm::Segment> segment;  // the peer's segment, for shared-memory peers
    bool goodbye = false;                   // it closed its communicator normally
    bool controlEof = false;
  };

  // Where a waiting run() is between spinning and sleeping.
  struct IdleState {
    bool started = false;
    Clock::time_point since;
    bool armed = false;  // sleeping flag raised, one more pass before the futex wait
    std::uint32_t bell = 0;
  };

  void progressAll(std::span<Op> ops, Deadline deadline);
  void idle(std::span<Op> ops, Deadline deadline, IdleState& state);
  void disarm(IdleState& state);
  // Whether ops[index] is unfinished and at the head of its (peer, direction) queue.
  bool pending(std::span<Op> ops, int index) const;
  // Op has all its bytes: one fewer remaining; an Op::expect that differs throws CallMismatch.
  void finished(const Op& op, int& remaining) const;
  // How far op `index` may go now: its `after` op's progress, or all of it.
  static std::size_t limitOf(std::span<Op> ops, int index);
  void handleControl(int peer);
  // Sends one control frame to every peer with a control connection, without waiting.
  void tellEveryPeer(const ControlMessage& message);
  [[noreturn]] void connectionBroke(int peer);
  [[noreturn]] void throwTimeout(std::span<Op> ops) const;
  std::string describe(int rank) const;

  int rank_;
  int size_;
  int spinMicros_;
  std::vector<int> hostIndices_;
  std::vector<Peer> peers_;  // indexed by rank; peers_[rank_] unused
  std::unique_ptr<shm::Segment> segment_;  // this rank's own segment (inbound rings)
  std::exception_ptr broken_;
  // Per-run scratch, kept to avoid allocating on the hot path.
  std::vector<int> prev_, next_, lastSend_, lastRecv_;
  std::vector<::pollfd> pollFds_;
  std::vector<int> pollOwners_;
};

}  // namespace gyre::transport
