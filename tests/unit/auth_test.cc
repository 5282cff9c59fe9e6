// The HMAC primitives and the mutual handshake, over a socket pair.
#include "common/auth.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <set>
#include <thread>

#include "common/socket.h"
#include "gyre/errors.h"

namespace gyre::auth {
namespace {

using std::chrono::milliseconds;

std::string hex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : d) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

std::pair<net::Fd, net::Fd> socketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) net::throwErrno("socketpair");
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

struct Outcome {
  std::string client;  // the exception each side threw; empty when it succeeded
  std::string server;
  bool clientProtocolError = false;
};

// Runs the server side on a thread and the client here.
Outcome handshake(std::string_view serverSecret, std::string_view clientSecret,
                  std::string_view serverContext, std::string_view clientContext) {
  auto [a, b] = socketPair();
  Outcome out;
  std::jthread server([&, fd = a.get()] {
    try {
      handshakeAsServer(fd, serverSecret, serverContext, Deadline::after(milliseconds(3000)));
    } catch (const std::exception& e) {
      out.server = e.what();
    }
  });
  try {
    handshakeAsClient(b.get(), clientSecret, clientContext, Deadline::after(milliseconds(3000)));
  } catch (const ProtocolError& e) {
    out.client = e.what();
    out.clientProtocolError = true;
  } catch (const std::exception& e) {
    out.client = e.what();
  }
  b.reset();  // as a real client would: its socket closes, so the server stops waiting
  server.join();
  return out;
}

TEST(Auth, HmacSha256MatchesRfc4231) {
  const std::string data = "what do ya want for nothing?";
  EXPECT_EQ(hex(hmacSha256("Jefe", data.data(), data.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 1: 20 bytes of 0x0b, "Hi There".
  EXPECT_EQ(hex(hmacSha256(std::string(20, '\x0b'), "Hi There", 8)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(Auth, ConstantTimeEqualComparesEveryByte) {
  const char a[] = "abcdef", b[] = "abcdef", c[] = "abcdeg";
  EXPECT_TRUE(constantTimeEqual(a, b, 6));
  EXPECT_FALSE(constantTimeEqual(a, c, 6));
  EXPECT_TRUE(constantTimeEqual(a, c, 5));
}

TEST(Auth, RandomBytesAndSecretsDiffer) {
  std::set<std::string> secrets;
  for (int i = 0; i < 16; ++i) {
    const std::string s = generateSecret();
    EXPECT_EQ(s.size(), 64u);
    EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos);
    secrets.insert(s);
  }
  EXPECT_EQ(secrets.size(), 16u);
  std::uint8_t x[32] = {}, y[32] = {};
  randomBytes(x, sizeof(x));
  randomBytes(y, sizeof(y));
  EXPECT_NE(std::memcmp(x, y, sizeof(x)), 0);
}

TEST(Auth, HandshakeSucceedsWithTheSameSecretAndContext) {
  const Outcome out = handshake("s3cret", "s3cret", "store", "store");
  EXPECT_EQ(out.client, "");
  EXPECT_EQ(out.server, "");
}

TEST(Auth, WrongSecretFailsOnBothSides) {
  const Outcome out = handshake("s3cret", "guess", "store", "store");
  EXPECT_TRUE(out.clientProtocolError) << out.client;
  EXPECT_NE(out.client.find("wrong secret"), std::string::npos) << out.client;
  EXPECT_NE(out.server, "");
}

TEST(Auth, SameSecretForAnotherContextFails) {
  const Outcome out = handshake("s3cret", "s3cret", "store", "transport/world");
  EXPECT_TRUE(out.clientProtocolError) << out.client;
  EXPECT_NE(out.server, "");
}

TEST(Auth, ServerRejectsAForgedProof) {
  auto [a, b] = socketPair();
  std::string serverError;
  std::jthread server([&, fd = a.get()] {
    try {
      handshakeAsServer(fd, "s3cret", "store", Deadline::after(milliseconds(3000)));
    } catch (const ProtocolError& e) {
      serverError = e.what();
    }
  });
  std::uint8_t hello[21] = {'G', 'Y', 'R', '1', 'C'};
  net::writeAll(b.get(), hello, sizeof(hello), Deadline::after(milliseconds(1000)));
  std::uint8_t reply[53];
  net::readAll(b.get(), reply, sizeof(reply), Deadline::after(milliseconds(1000)));
  // Replaying the server's own proof must not work: the roles are part of what is signed.
  net::writeAll(b.get(), reply + 21, 32, Deadline::after(milliseconds(1000)));
  server.join();
  EXPECT_NE(serverError.find("failed to prove"), std::string::npos) << serverError;
}

TEST(Auth, ServerRejectsBadMagicAndTimesOutOnSilence) {
  {
    auto [a, b] = socketPair();
    const char junk[21] = "GET / HTTP/1.1\r\n\r\n";
    net::writeAll(b.get(), junk, sizeof(junk), Deadline::after(milliseconds(1000)));
    EXPECT_THROW(handshakeAsServer(a.get(), "s", "store", Deadline::after(milliseconds(1000))),
                 ProtocolError);
  }
  {
    auto [a, b] = socketPair();
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(handshakeAsServer(a.get(), "s", "store", Deadline::after(milliseconds(200))), TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  }
}

}  // namespace
}  // namespace gyre::auth
