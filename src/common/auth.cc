#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "common/check.h"
#include "common/socket.h"

namespace gyre::auth {
namespace {

constexpr std::size_t kNonceBytes = 16;
constexpr char kMagic[4] = {'G', 'Y', 'R', '1'};
constexpr std::size_t kClientHelloBytes = sizeof(kMagic) + 1 + kNonceBytes;
constexpr std::size_t kServerHelloBytes = sizeof(kMagic) + 1 + kNonceBytes + sizeof(Digest);

using Nonce = std::array<std::uint8_t, kNonceBytes>;

// HMAC(secret, role context first second): what `role` ('S' or 'C') proves to the other side.
Digest proof(std::string_view secret, char role, std::string_view context, const Nonce& first,
             const Nonce& second) {
  std::string message;
  message.reserve(1 + context.size() + 2 * kNonceBytes);
  message.push_back(role);
  message.append(context);
  message.append(reinterpret_cast<const char*>(first.data()), first.size());
  message.append(reinterpret_cast<const char*>(second.data()), second.size());
  return hmacSha256(secret, message.data(), message.size());
}

void checkMagic(const std::uint8_t* hello, char role, const char* who) {
  if (std::memcmp(hello, kMagic, sizeof(kMagic)) != 0 ||
      hello[sizeof(kMagic)] != static_cast<std::uint8_t>(role))
    GYRE_THROW(ProtocolError, "handshake: ", who, " did not send a gyre hello (bad magic)");
}

}  // namespace

Digest hmacSha256(std::string_view key, const void* data, std::size_t n) {
  Digest out{};
  unsigned int len = 0;
  // HMAC() rejects a null key pointer even with length 0.
  static const char kEmpty = 0;
  const void* keyData = key.empty() ? &kEmpty : key.data();
  if (HMAC(EVP_sha256(), keyData, static_cast<int>(key.size()), static_cast<const unsigned char*>(data), n,
           out.data(), &len) == nullptr ||
      len != out.size())
    GYRE_THROW(SystemError, "HMAC-SHA256 failed");
  return out;
}

bool constantTimeEqual(const void* a, const void* b, std::size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

void randomBytes(void* out, std::size_t n) {
  GYRE_ARG_CHECK(n <= (1u << 30), "randomBytes: ", n, " bytes is too many");
  if (n > 0 && RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
    GYRE_THROW(SystemError, "RAND_bytes failed: the system random generator is unavailable");
}

std::string generateSecret() {
  std::array<std::uint8_t, 32> bytes{};
  randomBytes(bytes.data(), bytes.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

void handshakeAsServer(int fd, std::string_view secret, std::string_view context, Deadline deadline) {
  std::array<std::uint8_t, kClientHelloBytes> hello{};
  net::readAll(fd, hello.data(), hello.size(), deadline);
  checkMagic(hello.data(), 'C', "client");
  Nonce clientNonce{};
  std::memcpy(clientNonce.data(), hello.data() + sizeof(kMagic) + 1, kNonceBytes);

  Nonce serverNonce{};
  randomBytes(serverNonce.data(), serverNonce.size());
  const Digest serverProof = proof(secret, 'S', context, clientNonce, serverNonce);
  std::array<std::uint8_t, kServerHelloBytes> reply{};
  std::memcpy(reply.data(), kMagic, sizeof(kMagic));
  reply[sizeof(kMagic)] = 'S';
  std::memcpy(reply.data() + sizeof(kMagic) + 1, serverNonce.data(), kNonceBytes);
  std::memcpy(reply.data() + sizeof(kMagic) + 1 + kNonceBytes, serverProof.data(), serverProof.size());
  net::writeAll(fd, reply.data(), reply.size(), deadline);

  Digest clientProof{};
  net::readAll(fd, clientProof.data(), clientProof.size(), deadline);
  const Digest expected = proof(secret, 'C', context, serverNonce, clientNonce);
  if (!constantTimeEqual(clientProof.data(), expected.data(), expected.size()))
    GYRE_THROW(ProtocolError, "handshake: client failed to prove it knows the job secret for '", context,
               "'");
}

void handshakeAsClient(int fd, std::string_view secret, std::string_view context, Deadline deadline) {
  Nonce clientNonce{};
  randomBytes(clientNonce.data(), clientNonce.size());
  std::array<std::uint8_t, kClientHelloBytes> hello{};
  std::memcpy(hello.data(), kMagic, sizeof(kMagic));
  hello[sizeof(kMagic)] = 'C';
  std::memcpy(hello.data() + sizeof(kMagic) + 1, clientNonce.data(), kNonceBytes);
  net::writeAll(fd, hello.data(), hello.size(), deadline);

  std::array<std::uint8_t, kServerHelloBytes> reply{};
  net::readAll(fd, reply.data(), reply.size(), deadline);
  checkMagic(reply.data(), 'S', "server");
  Nonce serverNonce{};
  std::memcpy(serverNonce.data(), reply.data() + sizeof(kMagic) + 1, kNonceBytes);
  const Digest expected = proof(secret, 'S', context, clientNonce, serverNonce);
  if (!constantTimeEqual(reply.data() + sizeof(kMagic) + 1 + kNonceBytes, expected.data(), expected.size()))
    GYRE_THROW(ProtocolError, "handshake: server failed to prove it knows the job secret for '", context,
               "' (wrong secret?)");

  const Digest clientProof = proof(secret, 'C', context, serverNonce, clientNonce);
  net::writeAll(fd, clientProof.data(), clientProof.size(), deadline);
}

}  // namespace gyre::auth
