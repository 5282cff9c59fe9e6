#include "rt/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include <cstring>

#include "common/socket.h"
#include "gyre/errors.h"
#include "gyre/rt/future.h"
#include "gyre/rt/serialize.h"

namespace gyre::rt::wire {
namespace {

template <class T>
void put(std::uint8_t* at, T v) {
  std::memcpy(at, &v, sizeof(T));
}
template <class T>
T get(const std::uint8_t* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}

bool knownType(std::uint8_t type) {
  const std::uint8_t request = type & static_cast<std::uint8_t>(~kResponseBit);
  return request >= static_cast<std::uint8_t>(Type::kTask) && request <= static_cast<std::uint8_t>(Type::kKillActor);
}

const char* typeName(std::uint8_t type) {
  switch (static_cast<Type>(type & static_cast<std::uint8_t>(~kResponseBit))) {
    case Type::kTask: return "task";
    case Type::kCreateActor: return "create-actor";
    case Type::kCall: return "call";
    case Type::kGetObject: return "get-object";
    case Type::kKillActor: return "kill-actor";
  }
  return "unknown";
}

}  // namespace

std::string Message::debugString() const {
  return std::string(typeName(type)) + ((type & kResponseBit) ? " response" : "") + " id=" + std::to_string(id) +
         (actor ? " actor=" + std::to_string(actor) : "") + (name.empty() ? "" : " " + name) + " " +
         std::to_string(payload.size()) + " bytes";
}

void writeMessages(int fd, std::span<const Message> messages, Deadline deadline, const std::string& peer) {
  // One gathered write per kBatch messages (three parts each), its headers and parts on the stack.
  constexpr std::size_t kBatch = 64;
  std::array<std::array<std::uint8_t, kHeaderBytes>, kBatch> headers;
  std::array<iovec, 3 * kBatch> parts;
  for (std::size_t first = 0; first < messages.size(); first += kBatch) {
    const std::size_t n = std::min(kBatch, messages.size() - first);
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Message& m = messages[first + i];
      std::uint8_t* header = headers[i].data();
      std::memset(header, 0, kHeaderBytes);
      put<std::uint32_t>(header, kMagic);
      header[4] = m.type;
      header[5] = static_cast<std::uint8_t>(m.status);
      put<std::uint64_t>(header + 8, m.id);
      put<std::uint64_t>(header + 16, m.actor);
      put<std::uint32_t>(header + 24, static_cast<std::uint32_t>(m.name.size()));
      put<std::uint64_t>(header + 32, m.payload.size());
      parts[count++] = {header, kHeaderBytes};
      if (!m.name.empty()) parts[count++] = {const_cast<char*>(m.name.data()), m.name.size()};
      if (!m.payload.empty()) parts[count++] = {const_cast<char*>(m.payload.data()), m.payload.size()};
    }
    net::writeAllV(fd, std::span<iovec>(parts.data(), count), deadline, peer);
  }
}

void writeMessage(int fd, const Message& m, Deadline deadline, const std::string& peer) {
  writeMessages(fd, std::span<const Message>(&m, 1), deadline, peer);
}

void Reader::fill(std::size_t n, Deadline deadline) {
  if (end_ - begin_ >= n) return;
  if (buffer_.size() - begin_ < n) {  // compact: the partial message to the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  // Waiting without a deadline (for the next message), a blocking recv wakes with the bytes: one
  // system call where a poll would take three. The connection is in blocking mode, and shutdown()
  // ends the wait.
  const int flags = deadline.at() == Clock::time_point::max() ? 0 : MSG_DONTWAIT;
  while (end_ - begin_ < n) {
    const ssize_t r = ::recv(fd_, buffer_.data() + end_, buffer_.size() - end_, flags);
    if (r > 0) {
      end_ += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0 || errno == ECONNRESET)
      throw net::ConnectionClosed("connection to " + peer_ + " closed while reading");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) net::throwErrno("recv from " + peer_);
    if (!net::waitFor(fd_, POLLIN, deadline)) throw TimeoutError("gyre::rt: timed out reading a message from " + peer_);
  }
}

void Reader::take(char* out, std::size_t n, Deadline deadline) {
  const std::size_t buffered = std::min(n, end_ - begin_);
  std::memcpy(out, buffer_.data() + begin_, buffered);
  begin_ += buffered;
  if (buffered < n) net::readAll(fd_, out + buffered, n - buffered, deadline);
}

Message Reader::next(std::chrono::milliseconds rest) {
  fill(kHeaderBytes, Deadline::never());
  const auto* header = reinterpret_cast<const std::uint8_t*>(buffer_.data() + begin_);
  const Deadline deadline = Deadline::after(rest);
  auto refuse = [&](const std::string& why) {
    throw ProtocolError("gyre::rt: a malformed message from " + peer_ + ": " + why);
  };
  if (get<std::uint32_t>(header) != kMagic) refuse("not gyre::rt's magic");
  Message m;
  m.type = header[4];
  if (!knownType(m.type)) refuse("unknown type " + std::to_string(m.type));
  if (header[5] > static_cast<std::uint8_t>(Status::kError)) refuse("unknown status " + std::to_string(header[5]));
  m.status = static_cast<Status>(header[5]);
  m.id = get<std::uint64_t>(header + 8);
  m.actor = get<std::uint64_t>(header + 16);
  const auto nameBytes = get<std::uint32_t>(header + 24);
  const auto payloadBytes = get<std::uint64_t>(header + 32);
  if (nameBytes > kMaxNameBytes) refuse("a name of " + std::to_string(nameBytes) + " bytes");
  if (payloadBytes > kMaxPayloadBytes) refuse("a payload of " + std::to_string(payloadBytes) + " bytes");
  begin_ += kHeaderBytes;
  // A small message whole into the buffer first (one recv for it and the ones behind it).
  if (nameBytes + payloadBytes <= kBufferBytes) fill(nameBytes + payloadBytes, deadline);
  m.name.resize(nameBytes);
  take(m.name.data(), nameBytes, deadline);
  // A large payload grows as its bytes arrive: a header alone cannot make this process allocate.
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  while (m.payload.size() < payloadBytes) {
    const std::size_t done = m.payload.size();
    const std::size_t n = std::min<std::uint64_t>(kChunk, payloadBytes - done);
    m.payload.resize(done + n);
    take(m.payload.data() + done, n, deadline);
  }
  return m;
}

std::string encodeError(std::exception_ptr error) {
  return pack(detail::recordOf(std::move(error)));
}

std::exception_ptr decodeError(std::string_view bytes) {
  return detail::exceptionOf(unpack<detail::ErrorRecord>(bytes, "an error response"));
}

}  // namespace gyre::rt::wire
