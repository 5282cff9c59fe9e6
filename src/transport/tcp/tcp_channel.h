// A Channel over one TCP connection (non-blocking, TCP_NODELAY, large socket buffers).
// Receiving with reduction goes through a staging buffer, reduced chunk by chunk as it fills,
// so reduction overlaps the arrival of the rest: one copy by the kernel, one read by the reduce.
// A small receive (the call guard) takes the start of the next receive in the same system call
// (into the staging buffer, or, for a large plain receive, straight into its buffer): the guard
// and the data behind it cost one system call, not two.
// A small send marked Op::more (the call guard) is held here and goes out in the same sendmsg
// as the next send: one system call and one segment, not two.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>

#include "common/socket.h"
#include "transport/channel.h"

namespace gyre::transport::tcp {

class TcpChannel final : public Channel {
 public:
  explicit TcpChannel(net::Fd fd);

  std::size_t progressSend(Op& op, std::size_t limit) override;
  std::size_t progressRecv(Op& op, std::size_t limit) override;
  std::size_t progressRecvBefore(Op& op, std::size_t limit, Op& next, std::size_t nextLimit) override;
  int pollFd() const override { return fd_.get(); }
  void flushHeld() override;
  bool holding() const override { return heldSent_ < heldBytes_; }
  Transport kind() const override { return Transport::kTcp; }

 private:
  static constexpr std::size_t kStagingBytes = 256 * 1024;

  static constexpr std::size_t kMaxHeld = 128;
  // How far a small receive reads ahead into a plain receive behind it (a copy out of staging);
  // a larger one it takes straight into that receive's buffer.
  static constexpr std::size_t kReadAheadBytes = 16 * 1024;

  std::size_t recvReduce(Op& op, std::size_t limit);
  void consumeStaged(std::size_t n);
  std::size_t recvMessage(msghdr& message);

  net::Fd fd_;
  std::unique_ptr<std::uint8_t[]> staging_;
  // Bytes received but not yet taken, at staging_ + stageStart_: read ahead by a small receive,
  // or less than one element left by a receive-reduce. They are the stream's next bytes.
  std::size_t stageStart_ = 0, staged_ = 0;
  std::uint8_t held_[kMaxHeld] = {};  // a small Op::more send, to go out with the next one
  std::size_t heldBytes_ = 0, heldSent_ = 0;
};

}  // namespace gyre::transport::tcp
