#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/check.h"
#include "common/socket.h"

namespace gyre::auth {
namespace {

constexpr std::size_t kNonceBytes = 16;
constexpr char kMagic[4] = {'G', 'Y', 'R', '1'};
constexpr std::size_t kClientHelloBytes = sizeof(kMagic) + 1 + kNonceBytes;
constexpr std::size_t kServerHelloBytes = sizeof(kMagic) + 1 + kNonceBytes + sizeof(Digest);

using Nonce = std::array<std::uint8_t, kNonceBytes>;
static_assert(kServerHelloBytes == ServerHandshake::kBufferBytes && kClientHelloBytes < kServerHelloBytes);

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

net::Fd connectAuthenticated(const std::string& host, std::uint16_t port, std::string_view secret,
                             std::string_view context, Deadline deadline) {
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    try {
      net::Fd fd = net::connectTo(host, port, deadline);
      handshakeAsClient(fd.get(), secret, context, deadline);
      return fd;
    } catch (const ProtocolError&) {
      throw;  // a wrong secret, or not a gyre server: trying again changes nothing
    } catch (const Error&) {
      // Closed, reset or timed out while the server was busy: again, while time is left.
      if (deadline.remainingMs() <= static_cast<int>(pause.count())) throw;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

ServerHandshake::Want ServerHandshake::advance(int fd) {
  // Reads or writes the rest of `n` bytes of buffer_; false when the socket would block.
  auto transfer = [&](std::size_t n, bool reading) {
    while (done_ < n) {
      const ssize_t r = reading ? ::recv(fd, buffer_.data() + done_, n - done_, MSG_DONTWAIT)
                                : ::send(fd, buffer_.data() + done_, n - done_, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r > 0) {
        done_ += static_cast<std::size_t>(r);
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return false;
      } else {
        throw net::ConnectionClosed(std::string("handshake: the client ") + (r == 0 ? "closed the connection"
                                                                                    : std::strerror(errno)) +
                                    " after " + std::to_string(done_) + " of " + std::to_string(n) + " bytes");
      }
    }
    done_ = 0;
    return true;
  };
  for (;;) {
    switch (phase_) {
      case Phase::kHello: {
        if (!transfer(kClientHelloBytes, true)) return Want::kRead;
        checkMagic(buffer_.data(), 'C', "client");
        std::memcpy(clientNonce_.data(), buffer_.data() + sizeof(kMagic) + 1, kNonceBytes);
        randomBytes(serverNonce_.data(), serverNonce_.size());
        const Digest serverProof = proof(secret_, 'S', context_, clientNonce_, serverNonce_);
        std::memcpy(buffer_.data(), kMagic, sizeof(kMagic));
        buffer_[sizeof(kMagic)] = 'S';
        std::memcpy(buffer_.data() + sizeof(kMagic) + 1, serverNonce_.data(), kNonceBytes);
        std::memcpy(buffer_.data() + sizeof(kMagic) + 1 + kNonceBytes, serverProof.data(), serverProof.size());
        phase_ = Phase::kReply;
        break;
      }
      case Phase::kReply:
        if (!transfer(kServerHelloBytes, false)) return Want::kWrite;
        phase_ = Phase::kProof;
        break;
      case Phase::kProof: {
        if (!transfer(sizeof(Digest), true)) return Want::kRead;
        const Digest expected = proof(secret_, 'C', context_, serverNonce_, clientNonce_);
        if (!constantTimeEqual(buffer_.data(), expected.data(), expected.size()))
          GYRE_THROW(ProtocolError, "handshake: client failed to prove it knows the job secret for '", context_,
                     "'");
        phase_ = Phase::kDone;
        break;
      }
      case Phase::kDone:
        return Want::kDone;
    }
  }
}

}  // namespace gyre::auth
