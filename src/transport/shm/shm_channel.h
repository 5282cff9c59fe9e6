// A Channel between two ranks on one host: two single-producer single-consumer byte rings, one
// in each rank's segment. A message costs two copies: the sender's into the ring, the receiver's
// out of it; with reduction the second copy is the reduction itself (operands read from the
// ring), so a reduced byte is copied once and read once.
//
// Every message starts on a 64-byte boundary of the ring (the writer pads the end of each op),
// so no element ever straddles the ring's wrap-around and reductions run on aligned data.
// Head and tail are read and written seq_cst: with the owner's seq_cst `sleeping` flag that
// makes the doorbell race-free without fences (see Segment::notifyOwner).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/channel.h"
#include "transport/shm/segment.h"

namespace gyre::transport::shm {

class ShmChannel final : public Channel {
 public:
  // `inbound` is ring `inIndex` of this rank's own segment (the peer writes it); `outbound` is
  // ring `outIndex` of the peer's segment (this rank writes it). Both segments must outlive this.
  ShmChannel(const Segment& own, std::uint32_t inIndex, const Segment& peer, std::uint32_t outIndex);

  std::size_t progressSend(Op& op, std::size_t limit) override;
  std::size_t progressRecv(Op& op, std::size_t limit) override;
  int pollFd() const override { return -1; }
  Transport kind() const override { return Transport::kShm; }

 private:
  // Most bytes one call moves, so that a chunk is handed on while the next is being copied.
  static constexpr std::size_t kChunkBytes = 256 * 1024;

  const Segment& peer_;
  RingHeader* in_;
  std::uint8_t* inData_;
  RingHeader* out_;
  std::uint8_t* outData_;
  std::size_t inBytes_;
  std::size_t outBytes_;
  std::uint64_t sendBase_ = 0;  // ring head when the current send op started
  std::uint64_t recvBase_ = 0;  // ring tail when the current receive op started
  bool sendActive_ = false;
  bool recvActive_ = false;
};

}  // namespace gyre::transport::shm
