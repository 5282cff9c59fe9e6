// The byte mover between this rank and one peer, in both directions. Mesh::run drives channels;
// algorithms never see them. Every call is non-blocking: it moves what it can now and returns
// the number of bytes moved (0 when it would block).
#pragma once

#include <cstddef>

#include "transport/mesh.h"

namespace gyre::transport {

class Channel {
 public:
  virtual ~Channel() = default;

  // Sends bytes [op.done, limit) of op, advancing op.done. limit <= op.bytes.
  virtual std::size_t progressSend(Op& op, std::size_t limit) = 0;
  // Receives (kRecv) or receives and reduces (kRecvReduce) bytes [op.done, limit).
  virtual std::size_t progressRecv(Op& op, std::size_t limit) = 0;
  // progressRecv of a small kRecv (the call guard) whose next receive from this peer is known:
  // a channel may take the start of `next` with it (TCP: in the same system call), bytes
  // [next.done, nextLimit) into next's buffer or any amount kept aside for when next is
  // progressed. Returns the bytes moved for op; next.done may advance too.
  virtual std::size_t progressRecvBefore(Op& op, std::size_t limit, Op& next, std::size_t nextLimit) {
    (void)next, (void)nextLimit;
    return progressRecv(op, limit);
  }

  // The descriptor to poll(2) for readiness, or -1 when readiness is signalled through the
  // shared-memory doorbell instead.
  virtual int pollFd() const = 0;
  virtual Transport kind() const = 0;

  // The Mesh broke (a peer was lost, a time-out, a malformed message) and will not use this
  // channel again. Called once, by the Mesh's destructor, before the channel is destroyed.
  virtual void meshBroken() {}
  // Sends what progressSend held back for the next send (Op::more); the mesh calls it once it has
  // waited a while, so held bytes never wait for good on an op that waits on the peer.
  virtual void flushHeld() {}
  virtual bool holding() const { return false; }
};

// Thrown by channels when the connection to the peer broke; Mesh turns it into PeerLostError.
class ChannelClosed : public std::exception {
 public:
  const char* what() const noexcept override { return "connection closed"; }
};

}  // namespace gyre::transport
