// The job secret and the mutual HMAC handshake that every Store and transport connection runs
// before anything else is read from it.
//
// Wire (fixed sizes, so nothing is allocated from a peer's say-so before it is authenticated):
//   client -> server  hello:  "GYR1" 'C' nonce_c[16]
//   server -> client  hello:  "GYR1" 'S' nonce_s[16] HMAC(secret, "S" context nonce_c nonce_s)
//   client -> server  proof:  HMAC(secret, "C" context nonce_s nonce_c)
// `context` names the protocol ("store", "transport/<communicator>"), so a proof for one
// protocol is worthless for another.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/socket.h"

namespace gyre::auth {

using Digest = std::array<std::uint8_t, 32>;

Digest hmacSha256(std::string_view key, const void* data, std::size_t n);
bool constantTimeEqual(const void* a, const void* b, std::size_t n);
void randomBytes(void* out, std::size_t n);
// 32 random bytes as 64 hex characters.
std::string generateSecret();

// Both throw ProtocolError (bad magic, wrong proof) or net::ConnectionClosed / TimeoutError.
void handshakeAsServer(int fd, std::string_view secret, std::string_view context, Deadline deadline);
void handshakeAsClient(int fd, std::string_view secret, std::string_view context, Deadline deadline);

// Connects to host:port and runs the client handshake. A server that sheds load closes pending
// handshakes (AuthGate evicts the oldest when full), so a connection closed, reset or refused
// before the handshake completes is tried again until `deadline`; a wrong secret (ProtocolError)
// fails at once. Throws what the last attempt threw.
net::Fd connectAuthenticated(const std::string& host, std::uint16_t port, std::string_view secret,
                             std::string_view context, Deadline deadline);

// The server side of the handshake on a non-blocking socket, one step at a time, so that one
// thread can run thousands (common/auth_gate.h). advance() reads and writes what it can and
// says what it waits for; it throws ProtocolError or net::ConnectionClosed like handshakeAsServer.
class ServerHandshake {
 public:
  enum class Want { kRead, kWrite, kDone };
  ServerHandshake(std::string_view secret, std::string_view context) : secret_(secret), context_(context) {}
  Want advance(int fd);

  static constexpr std::size_t kBufferBytes = 53;  // the largest message: the server's hello

 private:
  enum class Phase { kHello, kReply, kProof, kDone };
  std::string_view secret_, context_;  // outlive the handshake (the gate's options)
  Phase phase_ = Phase::kHello;
  std::array<std::uint8_t, kBufferBytes> buffer_{};  // the client hello, then the reply, then the proof
  std::size_t done_ = 0;                             // bytes of the current phase read or written
  std::array<std::uint8_t, 16> clientNonce_{}, serverNonce_{};
};

}  // namespace gyre::auth
