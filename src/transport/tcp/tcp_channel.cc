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
  auto* dst = static_cast<std::uint8_t*>(op.data);
  std::size_t moved = 0;
  if (staged_ > 0 && op.done < limit) {  // read ahead by an earlier small receive
    const std::size_t n = std::min(staged_, limit - op.done);
    std::memcpy(dst + op.done, staging_.get() + stageStart_, n);
    consumeStaged(n);
    op.done += n;
    moved += n;
  }
  while (op.done < limit) {
    const std::size_t n = recvSome(fd_.get(), dst + op.done, limit - op.done);
    if (n == 0) break;
    op.done += n;
    moved += n;
  }
  return moved;
}

std::size_t TcpChannel::progressRecvBefore(Op& op, std::size_t limit, Op& next, std::size_t nextLimit) {
  if (staged_ > 0 || op.done != 0 || limit != op.bytes) return progressRecv(op, limit);
  if (next.kind == Op::Kind::kRecv && nextLimit > next.done + kReadAheadBytes) {
    // A large plain receive: straight into both buffers, no copy (a two-part recvmsg costs a
    // little more than a recv, which only a small message would notice).
    iovec parts[2] = {{op.data, op.bytes},
                      {static_cast<std::uint8_t*>(next.data) + next.done, nextLimit - next.done}};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = 2;
    const std::size_t got = recvMessage(message);
    op.done = std::min(got, op.bytes);
    next.done += got - op.done;
    return op.done;
  }
  // Otherwise one recv into the staging buffer: a receive-reduce reads from there anyway, and a
  // small plain receive gets a copy of at most kReadAheadBytes.
  if (!staging_) staging_ = std::make_unique<std::uint8_t[]>(kStagingBytes);
  const std::size_t cap = next.kind == Op::Kind::kRecv ? kReadAheadBytes : kStagingBytes - op.bytes;
  const std::size_t got =
      recvSome(fd_.get(), staging_.get(), op.bytes + std::min(next.bytes - next.done, cap));
  const std::size_t mine = std::min(got, op.bytes);
  std::memcpy(op.data, staging_.get(), mine);
  op.done = mine;
  stageStart_ = mine;
  staged_ = got - mine;
  if (staged_ == 0) stageStart_ = 0;
  return mine;
}

std::size_t TcpChannel::recvMessage(msghdr& message) {
  for (;;) {
    const ssize_t r = ::recvmsg(fd_.get(), &message, MSG_DONTWAIT);
    if (r > 0) return static_cast<std::size_t>(r);
    if (r == 0) throw ChannelClosed();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    throw ChannelClosed();
  }
}

void TcpChannel::consumeStaged(std::size_t n) {
  stageStart_ += n;
  staged_ -= n;
  if (staged_ == 0) stageStart_ = 0;
}

std::size_t TcpChannel::recvReduce(Op& op, std::size_t limit) {
  if (!staging_) staging_ = std::make_unique<std::uint8_t[]>(kStagingBytes);
  const std::size_t esize = dtypeSize(op.dtype);
  auto* dst = static_cast<std::uint8_t*>(op.data);
  const auto* other = static_cast<const std::uint8_t*>(op.other != nullptr ? op.other : op.data);
  std::size_t moved = 0;
  if (stageStart_ % esize != 0) {  // read ahead behind an odd-sized message: align the elements
    std::memmove(staging_.get(), staging_.get() + stageStart_, staged_);
    stageStart_ = 0;
  }
  while (op.done < limit) {
    // Reduce the whole elements already staged (read ahead, or left from the last receive).
    const std::size_t need = limit - op.done;
    const std::size_t usable = std::min(staged_, need) / esize * esize;
    if (usable > 0) {
      reduce::apply(op.dtype, op.op, dst + op.done, other + op.done, staging_.get() + stageStart_,
                    usable / esize);
      consumeStaged(usable);
      op.done += usable;
      moved += usable;
      continue;
    }
    if (staged_ >= need) break;  // the bytes are here; limit must grow first
    // Less than one element staged: receive more behind it.
    if (stageStart_ > 0) {
      std::memmove(staging_.get(), staging_.get() + stageStart_, staged_);
      stageStart_ = 0;
    }
    const std::size_t want = std::min(need - staged_, kStagingBytes - staged_);
    const std::size_t n = recvSome(fd_.get(), staging_.get() + staged_, want);
    if (n == 0) break;
    staged_ += n;
  }
  return moved;
}

}  // namespace gyre::transport::tcp
