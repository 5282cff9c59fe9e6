#include "transport/mesh_impl.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <sstream>

#include "common/check.h"
#include "common/cpu_relax.h"
#include "common/logging.h"
#include "transport/shm/futex.h"

namespace gyre::transport {
namespace {

constexpr int kPureSpinMicros = 2;
constexpr int kShmSleepMillis = 20;   // futex slice; liveness is checked between slices
constexpr int kTcpSleepMillis = 200;  // poll slice when only sockets are involved
constexpr int kMixedSleepMillis = 1;  // poll slice when shared memory and sockets are mixed
// Bytes a channel holds for the next send (the call guard) go out on their own only after the
// rank has waited this long: in matched calls that send follows and carries them (one packet,
// one wake-up for the peer); after mismatched calls it may never come.
constexpr int kFlushHeldMillis = 10;
// pollOwners_ of a data descriptor: its op can move now, or waits on another op's progress.
constexpr int kCanMove = -1;
constexpr int kWaitsOnAnotherOp = -2;
// A receive of at most this many bytes is paired with the next receive from the same peer.
constexpr std::size_t kPairedReceiveBytes = 64;
// MPI has no descriptor to sleep on: a waiting rank sleeps in slices that grow from the first
// to the last value, testing its requests between slices (and watching the control connections
// during them).
constexpr long kMpiFirstSleepMicros = 20;
constexpr long kMpiLastSleepMicros = 1000;

const char* verb(Op::Kind kind) {
  switch (kind) {
    case Op::Kind::kSend: return "send";
    case Op::Kind::kRecv: return "receive";
    case Op::Kind::kRecvReduce: return "receive+reduce";
  }
  return "?";
}

}  // namespace

MeshImpl::MeshImpl(const MeshOptions& options)
    : rank_(options.rank), size_(options.size), spinMicros_(options.spinMicros), peers_(options.size) {
  if (size_ == 1) hostIndices_ = {0};  // more ranks: filled by connect() from their records
}

MeshImpl::~MeshImpl() {
  // A rank that closes because it lost someone passes the loss on; otherwise it says goodbye.
  ControlMessage last{ControlType::kGoodbye, -1, {}};
  if (broken_) {
    try {
      std::rethrow_exception(broken_);
    } catch (const PeerLostError& e) {
      last = ControlMessage{ControlType::kAbort, e.rank(), e.what()};
    } catch (...) {
    }
  }
  const auto bye = last.encode();
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[r];
    if (broken_ && p.channel) p.channel->meshBroken();
    if (!p.control.valid()) continue;
    ssize_t ignored = ::send(p.control.get(), bye.data(), bye.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
  }
}

Transport MeshImpl::transportTo(int peer) const {
  GYRE_ARG_CHECK(peer >= 0 && peer < size_ && peer != rank_, "no pair with rank ", peer);
  return peers_[peer].channel ? peers_[peer].channel->kind() : Transport::kAuto;
}

std::string MeshImpl::hostOf(int rank) const {
  if (rank < 0 || rank >= size_ || rank == rank_) return "this host";
  const PeerInfo& i = peers_[rank].info;
  return i.hostname + " (" + i.address + ")";
}

std::string MeshImpl::describe(int rank) const {
  if (rank < 0 || rank >= size_) return "rank " + std::to_string(rank);
  const PeerInfo& i = peers_[rank].info;
  return "rank " + std::to_string(rank) + " (host " + hostOf(rank) + ", pid " + std::to_string(i.pid) + ")";
}

void MeshImpl::run(std::span<Op> ops, Deadline deadline) {
  if (broken_) std::rethrow_exception(broken_);
  try {
    progressAll(ops, deadline);
  } catch (const CallMismatch&) {
    broken_ = std::current_exception();  // out of step
    throw;
  } catch (const InvalidArgument&) {
    throw;  // rejected before anything moved: the mesh is still in step
  } catch (...) {
    broken_ = std::current_exception();
    throw;
  }
}

void MeshImpl::progressAll(std::span<Op> ops, Deadline deadline) {
  const int n = static_cast<int>(ops.size());
  prev_.assign(n, -1);
  next_.assign(n, -1);
  lastSend_.assign(size_, -1);
  lastRecv_.assign(size_, -1);
  int remaining = 0;
  for (int i = 0; i < n; ++i) {
    Op& op = ops[i];
    GYRE_ARG_CHECK(op.peer >= 0 && op.peer < size_ && op.peer != rank_, "op ", i, " names peer ", op.peer,
                   " in a mesh of ", size_, " ranks (this is rank ", rank_, ")");
    GYRE_ARG_CHECK(op.after < i, "op ", i, " depends on op ", op.after, ", which is not earlier in the list");
    GYRE_ARG_CHECK(op.kind != Op::Kind::kRecvReduce || op.bytes % dtypeSize(op.dtype) == 0, "op ", i,
                   " reduces ", op.bytes, " bytes, not a whole number of ", toString(op.dtype));
    op.done = 0;
    if (op.bytes == 0) continue;
    int& last = op.kind == Op::Kind::kSend ? lastSend_[op.peer] : lastRecv_[op.peer];
    prev_[i] = last;
    if (last >= 0) next_[last] = i;
    last = i;
    ++remaining;
  }

  IdleState idleState;
  while (remaining > 0) {
    bool progressed = false;
    for (int i = 0; i < n; ++i) {
      Op& op = ops[i];
      if (!pending(ops, i)) continue;
      const std::size_t limit = limitOf(ops, i);
      if (limit <= op.done) continue;
      Channel& channel = *peers_[op.peer].channel;
      std::size_t moved = 0;
      // A small receive (the call guard) may take the start of the next one from the peer with it.
      Op* next = nullptr;
      if (op.kind == Op::Kind::kRecv && op.bytes - op.done <= kPairedReceiveBytes && next_[i] >= 0)
        next = &ops[next_[i]];
      const std::size_t nextBefore = next != nullptr ? next->done : 0;
      try {
        if (op.kind == Op::Kind::kSend) {
          moved = channel.progressSend(op, limit);
        } else if (next != nullptr) {
          moved = channel.progressRecvBefore(op, limit, *next, limitOf(ops, next_[i]));
        } else {
          moved = channel.progressRecv(op, limit);
        }
      } catch (const ChannelClosed&) {
        connectionBroke(op.peer);
      }
      if (moved == 0) continue;
      progressed = true;
      if (op.done == op.bytes) finished(op, remaining);
      if (next != nullptr && next->done != nextBefore && next->done == next->bytes)
        finished(*next, remaining);
    }
    if (progressed) {
      if (idleState.armed) disarm(idleState);
      idleState.started = false;
      continue;
    }
    idle(ops, deadline, idleState);
  }
  if (idleState.armed) disarm(idleState);
}

void MeshImpl::finished(const Op& op, int& remaining) const {
  --remaining;
  if (op.expect != nullptr && std::memcmp(op.data, op.expect, op.bytes) != 0)
    throw CallMismatch(describe(op.peer) + " made a different call", op.peer, false);
}

bool MeshImpl::pending(std::span<Op> ops, int index) const {
  const Op& op = ops[index];
  const int p = prev_[index];
  return op.done != op.bytes && (p < 0 || ops[p].done == ops[p].bytes);
}

std::size_t MeshImpl::limitOf(std::span<Op> ops, int index) {
  const Op& op = ops[index];
  if (op.after < 0 || ops[op.after].done == ops[op.after].bytes) return op.bytes;
  return std::min(op.bytes, ops[op.after].done);
}

void MeshImpl::disarm(IdleState& state) {
  segment_->header()->sleeping.store(0, std::memory_order_relaxed);
  state.armed = false;
}

void MeshImpl::idle(std::span<Op> ops, Deadline deadline, IdleState& state) {
  const auto now = Clock::now();
  if (!state.started) {
    state.started = true;
    state.since = now;
  }
  const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - state.since).count();
  if (waited < kPureSpinMicros) {
    for (int i = 0; i < 32; ++i) cpuRelax();
    return;
  }
  if (waited < spinMicros_) {
    sched_yield();
    return;
  }
  if (deadline.expired()) throwTimeout(ops);
  bool holding = false;
  for (Peer& peer : peers_) {
    if (!peer.channel) continue;
    if (waited >= 1000L * kFlushHeldMillis) peer.channel->flushHeld();
    holding = holding || peer.channel->holding();
  }
  // While bytes are held, wake in time to flush them.
  const int cap = holding ? kFlushHeldMillis : 1 << 30;

  // Which descriptors can wake us: sockets of the pending TCP ops; shared memory rings the bell;
  // MPI offers none.
  pollFds_.clear();
  pollOwners_.clear();
  bool anyShm = false;
  bool anyMpi = false;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (!pending(ops, i)) continue;
    const Peer& peer = peers_[op.peer];
    if (peer.goodbye) {
      GYRE_THROW_PEER_LOST(op.peer, describe(op.peer), " closed its communicator while this rank still waits to ",
                           verb(op.kind), " ", op.bytes - op.done, " bytes with it");
    }
    const int fd = peer.channel->pollFd();
    if (fd < 0) {
      (peer.channel->kind() == Transport::kMpi ? anyMpi : anyShm) = true;
      continue;
    }
    pollFds_.push_back({fd, static_cast<short>(op.kind == Op::Kind::kSend ? POLLOUT : POLLIN), 0});
    pollOwners_.push_back(limitOf(ops, i) <= op.done ? kWaitsOnAnotherOp : kCanMove);
  }
  if (anyShm && !state.armed) {
    // Raise the flag, read the bell, then make one more pass: a peer that publishes after the
    // pass sees the flag and rings, so the futex wait below cannot miss it.
    segment_->header()->sleeping.store(1, std::memory_order_seq_cst);
    state.bell = segment_->header()->doorbell.load(std::memory_order_seq_cst);
    state.armed = true;
    return;
  }
  const std::size_t dataFds = pollFds_.size();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !peers_[r].control.valid() || peers_[r].controlEof) continue;
    pollFds_.push_back({peers_[r].control.get(), POLLIN, 0});
    pollOwners_.push_back(r);
  }

  if (anyMpi) {
    // Sleep a slice (longer the longer this wait has lasted), woken early only by a control
    // message; the caller's next pass tests the MPI requests.
    const long waitedMicros =
        std::chrono::duration_cast<std::chrono::microseconds>(now - state.since).count();
    const long slice = std::clamp(waitedMicros / 8, kMpiFirstSleepMicros, kMpiLastSleepMicros);
    const timespec timeout{0, 1000 * slice};
    ::ppoll(pollFds_.data(), pollFds_.size(), &timeout, nullptr);
  } else if (anyShm && dataFds == 0) {
    shm::futexWait(&segment_->header()->doorbell, state.bell,
                   1000L * deadline.remainingMs(kShmSleepMillis) + 100);
    disarm(state);
    ::poll(pollFds_.data(), pollFds_.size(), 0);
  } else {
    const int slice = anyShm ? kMixedSleepMillis : std::min(kTcpSleepMillis, cap);
    ::poll(pollFds_.data(), pollFds_.size(), deadline.remainingMs(slice));
    if (state.armed) disarm(state);
  }
  // A socket is ready only for an op that waits on another (the bytes of a later step that came
  // early): poll returned at once and will again until that op moves. Keep polling, since the op
  // it waits on is about to move, but let the ranks sharing this core run in between.
  bool movable = false, early = false;
  for (std::size_t k = 0; k < dataFds; ++k) {
    if (pollFds_[k].revents == 0) continue;
    (pollOwners_[k] == kCanMove ? movable : early) = true;
  }
  if (early && !movable) sched_yield();
  for (std::size_t k = dataFds; k < pollFds_.size(); ++k)
    if (pollFds_[k].revents != 0) handleControl(pollOwners_[k]);
}

void MeshImpl::handleControl(int peer) {
  Peer& p = peers_[peer];
  const bool open = p.reader.readAvailable(p.control.get());
  ControlMessage message;
  while (p.reader.next(message)) {
    if (message.type == ControlType::kGoodbye) {
      p.goodbye = true;
    } else if (message.type == ControlType::kMismatch) {
      throw CallMismatch(message.reason + " (reported by " + describe(peer) + ")", peer, true);
    } else {
      GYRE_THROW_PEER_LOST(message.lostRank, describe(peer), " reports that ", describe(message.lostRank),
                           " is lost: ", message.reason);
    }
  }
  if (!open) {
    p.controlEof = true;
    if (!p.goodbye) {
      GYRE_THROW_PEER_LOST(peer, "lost ", describe(peer),
                           ": its process died or its connection broke (closed without a goodbye)");
    }
  }
}

void MeshImpl::connectionBroke(int peer) {
  // An abort or a death elsewhere explains more than this broken connection (often its
  // consequence): handleControl throws for those.
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && r != peer && peers_[r].control.valid() && !peers_[r].controlEof) handleControl(r);
  Peer& p = peers_[peer];
  if (!p.controlEof) handleControl(peer);  // throws if the peer died or reported a loss
  GYRE_THROW_PEER_LOST(peer, "the data connection to ", describe(peer), " broke",
                       p.goodbye ? " after it closed its communicator" : "");
}

void MeshImpl::throwTimeout(std::span<Op> ops) const {
  std::ostringstream out;
  out << "timed out waiting for";
  int listed = 0;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (!pending(ops, i)) continue;
    out << (listed++ ? "; " : " ") << describe(op.peer) << " to " << verb(op.kind) << " (" << op.done << " of "
        << op.bytes << " bytes done)";
  }
  throw TimeoutError(out.str());
}

void MeshImpl::tellEveryPeer(const ControlMessage& message) {
  const auto frame = message.encode();
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[r];
    if (r == rank_ || !p.control.valid()) continue;
    ssize_t ignored = ::send(p.control.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
  }
}

void MeshImpl::reportMismatch(const std::string& reason) {
  tellEveryPeer(ControlMessage{ControlType::kMismatch, rank_, reason});
  broken_ = std::make_exception_ptr(CallMismatch(reason, rank_, false));
}

void MeshImpl::abort(int lostRank, const std::string& reason) {
  tellEveryPeer(ControlMessage{ControlType::kAbort, lostRank, reason});
  if (!broken_) broken_ = std::make_exception_ptr(PeerLostError("communicator aborted: " + reason, lostRank));
}

}  // namespace gyre::transport
