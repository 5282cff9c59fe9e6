#include "transport/control.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/check.h"

namespace gyre::transport {
namespace {

void putU32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint32_t getU32(const std::uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

std::vector<std::uint8_t> ControlMessage::encode() const {
  const bool payload = type == ControlType::kAbort || type == ControlType::kMismatch;
  const std::size_t text = payload ? std::min<std::size_t>(reason.size(), 4000) : 0;
  const std::uint32_t length = payload ? static_cast<std::uint32_t>(4 + text) : 0;
  std::vector<std::uint8_t> out;
  out.reserve(8 + length);
  putU32(out, static_cast<std::uint32_t>(type));
  putU32(out, length);
  if (payload) {
    putU32(out, static_cast<std::uint32_t>(lostRank));
    for (std::size_t i = 0; i < text; ++i) out.push_back(static_cast<std::uint8_t>(reason[i]));
  }
  return out;
}

std::string ControlMessage::debugString() const {
  if (type == ControlType::kGoodbye) return "goodbye";
  if (type == ControlType::kMismatch) return "mismatch(" + reason + ")";
  return "abort(lost rank " + std::to_string(lostRank) + ": " + reason + ")";
}

bool ControlReader::readAvailable(int fd) {
  std::uint8_t chunk[4096];
  for (;;) {
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.insert(buffer_.end(), chunk, chunk + n);
      if (buffer_.size() > 4 * (kMaxControlPayload + 8))
        GYRE_THROW(ProtocolError, "control connection flooded with ", buffer_.size(), " unread bytes");
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;
  }
}

bool ControlReader::next(ControlMessage& out) {
  if (buffer_.size() < 8) return false;
  const std::uint32_t type = getU32(buffer_.data());
  const std::uint32_t length = getU32(buffer_.data() + 4);
  if (type != static_cast<std::uint32_t>(ControlType::kGoodbye) &&
      type != static_cast<std::uint32_t>(ControlType::kAbort) && type != static_cast<std::uint32_t>(ControlType::kMismatch))
    GYRE_THROW(ProtocolError, "unknown control message type ", type);
  if (length > kMaxControlPayload) GYRE_THROW(ProtocolError, "control message of ", length, " bytes is too long");
  if (buffer_.size() < 8 + length) return false;
  out = ControlMessage{static_cast<ControlType>(type), -1, {}};
  if (out.type == ControlType::kAbort || out.type == ControlType::kMismatch) {
    if (length < 4) GYRE_THROW(ProtocolError, "abort message without a rank");
    out.lostRank = static_cast<int>(getU32(buffer_.data() + 8));
    out.reason.assign(buffer_.begin() + 12, buffer_.begin() + 8 + length);
  }
  buffer_.erase(buffer_.begin(), buffer_.begin() + 8 + length);
  return true;
}

}  // namespace gyre::transport
