// gyre::rt's wire between the processes of a runtime. After the auth handshake (context "rt"),
// the process that calls sends requests; the one that runs them answers each with one response
// carrying the request's id, in the order the calls finish.
//
// Message: a fixed 40-byte header, the name (nameBytes), then the payload (payloadBytes).
//   0  u32 magic "GRT1"   4 u8 type    5 u8 status   6 u16 zero
//   8  u64 id            16 u64 actor  24 u32 nameBytes  28 u32 zero  32 u64 payloadBytes
// Integers little-endian (the hosts' order; gyre runs on little-endian machines). By type:
//   kTask         name = function, payload = its packed arguments
//   kCreateActor  name = class \0 actor name \0 times built before \0 calls at once (decimals),
//                 actor = the id its creator chose, payload = the constructor's arguments
//   kCall         name = method, actor, payload = its packed arguments
//   kGetObject    actor = the object's id -> payload = its value
//   kKillActor    actor = the actor's id -> nil (its calls fail from then on)
// A response has type (request type | kResponseBit): status kOk with the packed result, or
// kError with an encoded error (encodeError). Lengths are checked against kMaxNameBytes and
// kMaxPayloadBytes before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace gyre::rt::wire {

constexpr std::string_view kAuthContext = "rt";
constexpr std::uint32_t kMagic = 0x31545247;  // "GRT1"
constexpr std::size_t kHeaderBytes = 40;
constexpr std::size_t kMaxNameBytes = 1024;
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 34;  // 16 GiB
constexpr std::uint8_t kResponseBit = 0x80;

enum class Type : std::uint8_t { kTask = 1, kCreateActor = 2, kCall = 3, kGetObject = 4, kKillActor = 5 };
enum class Status : std::uint8_t { kOk = 0, kError = 1 };

struct Message {
  std::uint8_t type = 0;
  Status status = Status::kOk;
  std::uint64_t id = 0;
  std::uint64_t actor = 0;
  std::string name;
  std::string payload;

  // "call id=7 actor=3 Counter::add 12 bytes", for errors and logs.
  std::string debugString() const;
};

// Writes `m` whole (header, name, payload in one writev). Throws net::ConnectionClosed,
// TimeoutError.
void writeMessage(int fd, const Message& m, Deadline deadline, const std::string& peer);
// Writes `messages` whole, in order, gathered into as few system calls as the kernel takes.
void writeMessages(int fd, std::span<const Message> messages, Deadline deadline, const std::string& peer);
// Reads the messages of one connection through a buffer: one recv takes as many small messages
// as have arrived, so a stream of calls costs a system call per batch, not three per message.
class Reader {
 public:
  Reader(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)), buffer_(kBufferBytes) {}
  // The next message: waits for its header without limit (until the connection closes), then
  // for the rest within `rest`. ProtocolError for a bad magic, type or length, naming the peer;
  // net::ConnectionClosed at the end.
  Message next(std::chrono::milliseconds rest);

 private:
  static constexpr std::size_t kBufferBytes = 64 << 10;
  // Until `n` bytes are buffered (n <= kBufferBytes), by `deadline`.
  void fill(std::size_t n, Deadline deadline);
  // Moves `n` bytes out to `out`: the buffered ones, then straight from the socket.
  void take(char* out, std::size_t n, Deadline deadline);
  int fd_;
  std::string peer_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // the buffered bytes not yet taken
};

// An error raised where a call ran, as a response payload, and back: RemoteError,
// InvalidArgument, ProtocolError, TimeoutError, PeerLostError and ActorDiedError keep their type;
// anything else comes back as gyre::Error with its message.
std::string encodeError(std::exception_ptr error);
std::exception_ptr decodeError(std::string_view bytes);

}  // namespace gyre::rt::wire
