#include "transport/shm/shm_channel.h"

#include <algorithm>
#include <cstring>

#include "common/reduce.h"

namespace gyre::transport::shm {
namespace {

constexpr std::uint64_t roundUp(std::uint64_t n) { return (n + kCacheLine - 1) & ~(kCacheLine - 1); }
constexpr std::uint64_t roundDown(std::uint64_t n) { return n & ~(kCacheLine - 1); }

}  // namespace

ShmChannel::ShmChannel(const Segment& own, std::uint32_t inIndex, const Segment& peer, std::uint32_t outIndex)
    : peer_(peer),
      in_(own.ring(inIndex)),
      inData_(own.ringData(inIndex)),
      out_(peer.ring(outIndex)),
      outData_(peer.ringData(outIndex)),
      inBytes_(own.ringBytes()),
      outBytes_(peer.ringBytes()) {}

std::size_t ShmChannel::progressSend(Op& op, std::size_t limit) {
  if (!sendActive_) {
    sendBase_ = out_->head.load(std::memory_order_relaxed);
    sendActive_ = true;
  }
  const std::uint64_t head = sendBase_ + op.done;
  const std::uint64_t tail = out_->tail.load(std::memory_order_seq_cst);
  const std::uint64_t space = outBytes_ - (head - tail);
  std::uint64_t n = std::min<std::uint64_t>({limit - op.done, space, kChunkBytes});
  bool last = op.done + n == op.bytes;
  if (last && roundUp(n) > space) last = false;
  if (!last) n = roundDown(n);
  if (n == 0) return 0;

  const std::uint64_t off = head % outBytes_;
  const std::uint64_t first = std::min<std::uint64_t>(n, outBytes_ - off);
  const auto* src = static_cast<const std::uint8_t*>(op.data) + op.done;
  std::memcpy(outData_ + off, src, first);
  if (n > first) std::memcpy(outData_, src + first, n - first);

  op.done += n;
  out_->head.store(last ? sendBase_ + roundUp(op.bytes) : head + n, std::memory_order_seq_cst);
  if (last) sendActive_ = false;
  peer_.notifyOwner();
  return n;
}

std::size_t ShmChannel::progressRecv(Op& op, std::size_t limit) {
  if (!recvActive_) {
    recvBase_ = in_->tail.load(std::memory_order_relaxed);
    recvActive_ = true;
  }
  const std::uint64_t tail = recvBase_ + op.done;
  const std::uint64_t head = in_->head.load(std::memory_order_seq_cst);
  std::uint64_t n = std::min<std::uint64_t>({head - tail, limit - op.done, kChunkBytes});
  const bool reducing = op.kind == Op::Kind::kRecvReduce;
  const std::size_t esize = reducing ? dtypeSize(op.dtype) : 1;
  n = n / esize * esize;
  if (n == 0) return 0;

  const std::uint64_t off = tail % inBytes_;
  const std::uint64_t first = std::min<std::uint64_t>(n, inBytes_ - off);
  auto* dst = static_cast<std::uint8_t*>(op.data) + op.done;
  if (reducing) {
    const auto* other = static_cast<const std::uint8_t*>(op.other != nullptr ? op.other : op.data) + op.done;
    reduce::apply(op.dtype, op.op, dst, other, inData_ + off, first / esize);
    if (n > first) reduce::apply(op.dtype, op.op, dst + first, other + first, inData_, (n - first) / esize);
  } else {
    std::memcpy(dst, inData_ + off, first);
    if (n > first) std::memcpy(dst + first, inData_, n - first);
  }

  op.done += n;
  const bool last = op.done == op.bytes;
  in_->tail.store(last ? recvBase_ + roundUp(op.bytes) : tail + n, std::memory_order_seq_cst);
  if (last) recvActive_ = false;
  peer_.notifyOwner();
  return n;
}

}  // namespace gyre::transport::shm
