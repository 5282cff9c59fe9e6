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

}  // namespace gyre::auth
