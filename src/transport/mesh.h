// The transport layer's seam: a Mesh connects one rank to every other rank of a communicator
// and moves bytes between them. Collective algorithms describe one step as a list of Ops and
// hand it to Mesh::run, which progresses all of them at once (full duplex, every peer), so an
// algorithm never deadlocks on buffer space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gyre/errors.h"
#include "gyre/store.h"
#include "gyre/types.h"

namespace gyre::transport {

// One send or receive in an exchange. Every send op is one message: the peer must take it with
// exactly one receive op of the same size, in the same order (the shared-memory transport
// starts each message on a fresh 64-byte boundary, so splitting a message differently on the
// two ends corrupts the stream). Debug mode checks the collectives' arguments; algorithms are
// checked by the FakeMesh tests, which enforce this rule.
// Ranks made different calls: an Op::expect that did not match, or a peer that saw one. An
// InvalidArgument (the caller's mistake), but the mesh is broken: its streams are out of step.
class CallMismatch : public InvalidArgument {
 public:
  CallMismatch(const std::string& what, int peer, bool reported)
      : InvalidArgument(what), peer_(peer), reported_(reported) {}
  int peer() const { return peer_; }  // the rank whose message did not match, or who reported it
  bool reported() const { return reported_; }  // by a peer, rather than seen here

 private:
  int peer_;
  bool reported_;
};

struct Op {
  enum class Kind : std::uint8_t {
    kSend,        // send `bytes` from `data`
    kRecv,        // receive `bytes` into `data`
    kRecvReduce,  // receive `bytes` of `dtype` elements x; data[i] = other[i] (op) x[i]
  };
  Kind kind = Kind::kSend;
  int peer = -1;
  void* data = nullptr;
  std::size_t bytes = 0;
  // kRecvReduce: the left operand; null means `data` itself (reduce in place).
  const void* other = nullptr;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  // Index of an earlier op in the same list that this one waits on, byte for byte: byte k of
  // this op waits for byte k of ops[after] (this op processes bytes [0, ops[after].done) until
  // that op completes). That is how a step forwards a chunk as soon as it has arrived
  // (pipelining): send(right, seg) after recvReduce(left, seg). -1: no dependency.
  int after = -1;
  // kRecv: when not null, the received bytes must equal these `bytes` bytes, checked as soon as
  // they are in, before any later op with the peer is progressed (the bytes behind them may have
  // come in the same system call); otherwise run() throws CallMismatch (collectives/call_guard.h).
  const void* expect = nullptr;
  // kSend: the next op in the list sends to the same peer, so a byte stream may hold these bytes
  // back to go out with it (TCP: one sendmsg): the call guard and the first data share a packet.
  bool more = false;
  // Progress in bytes; run() sets it to `bytes` on success.
  std::size_t done = 0;

  static Op send(int peer, const void* data, std::size_t bytes, int after = -1) {
    Op o;
    o.kind = Kind::kSend, o.peer = peer, o.data = const_cast<void*>(data), o.bytes = bytes, o.after = after;
    return o;
  }
  static Op recv(int peer, void* data, std::size_t bytes, int after = -1) {
    Op o;
    o.kind = Kind::kRecv, o.peer = peer, o.data = data, o.bytes = bytes, o.after = after;
    return o;
  }
  static Op recvReduce(int peer, void* data, std::size_t bytes, DataType dtype, ReduceOp op,
                       const void* other = nullptr, int after = -1) {
    Op o;
    o.kind = Kind::kRecvReduce, o.peer = peer, o.data = data, o.bytes = bytes, o.other = other;
    o.dtype = dtype, o.op = op, o.after = after;
    return o;
  }
};

struct MeshOptions {
  int rank = 0;
  int size = 1;
  Transport transport = Transport::kAuto;
  // Interface name or address to listen on; empty: derived by the caller (see Communicator).
  std::string bindAddress = "127.0.0.1";
  std::string secret;
  // Unique per communicator within the store; keys live under "<name>/".
  std::string name = "world";
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(60)};
  // How long a waiting rank spins (yielding the core) before it sleeps (GYRE_SPIN_US).
  int spinMicros = 50;
  // Size of each shared-memory ring, one per direction per local pair (GYRE_SHM_RING_BYTES).
  std::size_t shmRingBytes = 4 << 20;
};

// All connections of one rank in one communicator.
//
// Thread-safety: run() must not be called concurrently on one Mesh (the engine serialises it).
// Failure: a peer that dies (its connection closes without a goodbye) makes run() throw
// PeerLostError naming it, even when the current ops do not involve that peer; so does a peer
// that reports it lost someone. Past the deadline run() throws TimeoutError naming the peers it
// still waits on. After either, the Mesh is broken and every later run() throws the same error.
class Mesh {
 public:
  // Connects to every peer, publishing this rank's address in the store. Blocks until all are
  // connected or options.connectTimeout passes.
  static std::unique_ptr<Mesh> connect(Store& store, const MeshOptions& options);

  virtual ~Mesh() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The transport chosen for the pair (rank, peer).
  virtual Transport transportTo(int peer) const = 0;
  // A printable host identity of `rank` (for error messages).
  virtual std::string hostOf(int rank) const = 0;
  // Which host each rank runs on, as an index per rank: ranks with the same index share a
  // kernel, memory and a network namespace. Hosts are numbered in the order of their lowest rank.
  virtual std::span<const int> hostIndices() const = 0;

  // Progresses every op until all are done. Ops in the same direction with the same peer run
  // in list order; everything else runs concurrently.
  virtual void run(std::span<Op> ops, Deadline deadline) = 0;

  // Tells every peer this rank is failing because of `reason` (they raise PeerLostError naming
  // `lostRank`), then breaks the mesh. Used when a collective fails locally.
  virtual void abort(int lostRank, const std::string& reason) = 0;
  // Tells every peer that the ranks made different calls (they raise CallMismatch with
  // `reason`), then breaks the mesh: its streams are out of step.
  virtual void reportMismatch(const std::string& reason) { abort(rank(), reason); }

  void send(int peer, const void* data, std::size_t bytes, Deadline deadline) {
    Op op = Op::send(peer, data, bytes);
    run(std::span<Op>(&op, 1), deadline);
  }
  void recv(int peer, void* data, std::size_t bytes, Deadline deadline) {
    Op op = Op::recv(peer, data, bytes);
    run(std::span<Op>(&op, 1), deadline);
  }
};

}  // namespace gyre::transport
