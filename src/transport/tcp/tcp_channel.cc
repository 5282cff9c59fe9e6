#include "transport/tcp/tcp_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/reduce.h"

namespace gyre::transport::tcp {
namespace {

// send/recv that return 0 on EAGAIN and throw ChannelClosed when the connection is gone.
std::size_t sendSome(int fd, const void* p, std::size_t n) {
  for (;;) {
    ssize_t r = ::send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r >= 0) return static_cast<std::size_t>(r);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw ChannelClosed();
  }
}

std::size_t recvSome(int fd, void* p, std::size_t n) {
  for (;;) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) return static_cast<std::size_t>(r);
    if (r == 0) throw ChannelClosed();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw ChannelClosed();
  }
}

}  // namespace

TcpChannel::TcpChannel(net::Fd fd) : fd_(std::move(fd)) {
  net::setNonBlocking(fd_.get(), true);
  net::setNoDelay(fd_.get());
  net::setBufferSizes(fd_.get(), 4 << 20);
}

std::size_t TcpChannel::progressSend(Op& op, std::size_t limit) {
  if (op.more && op.done == 0 && limit == op.bytes && op.bytes <= kMaxHeld - heldBytes_) {
    // Held, and counted as sent: the stream keeps its order, and the next send carries it.
    std::memcpy(held_ + heldBytes_, op.data, op.bytes);
    heldBytes_ += op.bytes;
    op.done = op.bytes;
    return op.bytes;
  }
  std::size_t moved = 0;
  while (heldSent_ < heldBytes_ && op.done < limit) {
    iovec parts[2] = {{held_ + heldSent_, heldBytes_ - heldSent_},
                      {static_cast<std::uint8_t*>(op.data) + op.done, limit - op.done}};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = 2;
    const ssize_t r = ::sendmsg(fd_.get(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      throw ChannelClosed();
    }
    auto n = static_cast<std::size_t>(r);
    const std::size_t fromHeld = std::min(n, heldBytes_ - heldSent_);
    heldSent_ += fromHeld;
    n -= fromHeld;
    op.done += n;
    moved += n;
    if (heldSent_ == heldBytes_) heldSent_ = heldBytes_ = 0;
  }
  while (op.done < limit) {
    std::size_t n = sendSome(fd_.get(), static_cast<std::uint8_t*>(op.data) + op.done, limit - op.done);
    if (n == 0) break;
    op.done += n;
    moved += n;
  }
  return moved;
}

void TcpChannel::flushHeld() {
  while (heldSent_ < heldBytes_) {
    const std::size_t n = sendSome(fd_.get(), held_ + heldSent_, heldBytes_ - heldSent_);
    if (n == 0) return;  // the socket is full: the next progressSend or flush goes on
    heldSent_ += n;
  }
  heldSent_ = heldBytes_ = 0;
}

std::size_t TcpChannel::progressRecv(Op& op, std::size_t limit) {
  if (op.kind == Op::Kind::kRecvReduce) return recvReduce(op, limit);
  std::size_t moved = 0;
  while (op.done < limit) {
    std::size_t n = recvSome(fd_.get(), static_cast<std::uint8_t*>(op.data) + op.done, limit - op.done);
    if (n == 0) break;
    op.done += n;
    moved += n;
  }
  return moved;
}

std::size_t TcpChannel::recvReduce(Op& op, std::size_t limit) {
  if (!staging_) staging_ = std::make_unique<std::uint8_t[]>(kStagingBytes);
  const std::size_t esize = dtypeSize(op.dtype);
  auto* dst = static_cast<std::uint8_t*>(op.data);
  const auto* other = static_cast<const std::uint8_t*>(op.other != nullptr ? op.other : op.data);
  std::size_t moved = 0;
  while (op.done < limit) {
    const std::size_t want = std::min(limit - op.done - staged_, kStagingBytes - staged_);
    if (want == 0) break;
    std::size_t n = recvSome(fd_.get(), staging_.get() + staged_, want);
    if (n == 0) break;
    staged_ += n;
    const std::size_t usable = staged_ / esize * esize;
    if (usable == 0) continue;
    reduce::apply(op.dtype, op.op, dst + op.done, other + op.done, staging_.get(), usable / esize);
    op.done += usable;
    moved += usable;
    staged_ -= usable;
    if (staged_ > 0) std::memmove(staging_.get(), staging_.get() + usable, staged_);
  }
  return moved;
}

}  // namespace gyre::transport::tcp
