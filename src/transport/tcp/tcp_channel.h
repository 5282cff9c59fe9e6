// A Channel over one TCP connection (non-blocking, TCP_NODELAY, large socket buffers).
// Receiving with reduction goes through a staging buffer, reduced chunk by chunk as it fills,
// so reduction overlaps the arrival of the rest: one copy by the kernel, one read by the reduce.
// A small send marked Op::more (the call guard) is held here and goes out in the same sendmsg
// as the next send: one system call and one segment, not two.
#pragma once

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
  int pollFd() const override { return fd_.get(); }
  void flushHeld() override;
  bool holding() const override { return heldSent_ < heldBytes_; }
  Transport kind() const override { return Transport::kTcp; }

 private:
  static constexpr std::size_t kStagingBytes = 256 * 1024;

  static constexpr std::size_t kMaxHeld = 64;

  std::size_t recvReduce(Op& op, std::size_t limit);

  net::Fd fd_;
  std::unique_ptr<std::uint8_t[]> staging_;
  std::size_t staged_ = 0;  // bytes in staging_ not yet reduced (less than one element)
  std::uint8_t held_[kMaxHeld] = {};  // a small Op::more send, to go out with the next one
  std::size_t heldBytes_ = 0, heldSent_ = 0;
};

}  // namespace gyre::transport::tcp
