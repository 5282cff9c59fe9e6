// Sockets over IPv4 and IPv6 loopback: addresses, connect with retry, whole-buffer I/O under
// deadlines, and the errors each failure raises.
#include "common/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::net {
namespace {

using test::spawn;

using std::chrono::milliseconds;
using std::chrono::seconds;

bool closeOnExec(int fd) {
  return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

// A port nothing listens on (a moment ago).
std::uint16_t freePort(const std::string& host) {
  Fd probe = listenOn(host, 0);
  return localPort(probe.get());
}

TEST(SocketAddress, SplitAndJoinHostPort) {
  EXPECT_EQ(splitHostPort("node1:29500"), std::make_pair(std::string("node1"), std::uint16_t{29500}));
  EXPECT_EQ(splitHostPort("10.0.0.1:0"), std::make_pair(std::string("10.0.0.1"), std::uint16_t{0}));
  EXPECT_EQ(splitHostPort("[::1]:80"), std::make_pair(std::string("::1"), std::uint16_t{80}));
  EXPECT_EQ(splitHostPort("[fe80::1%eth0]:65535").first, "fe80::1%eth0");
  for (const char* bad : {"", "node1", "node1:", ":80", "node1:http", "node1:65536", "node1:-1", "::1:80",
                          "[::1]80", "[::1]:", "[::1", "host:12x"}) {
    EXPECT_THROW(splitHostPort(bad), InvalidArgument) << bad;
  }
  EXPECT_EQ(joinHostPort("node1", 5), "node1:5");
  EXPECT_EQ(joinHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(splitHostPort(joinHostPort("fd00::2", 7)).first, "fd00::2");
}

TEST(SocketAddress, ResolveInterface) {
  EXPECT_EQ(resolveInterface("lo"), "127.0.0.1");
  EXPECT_EQ(resolveInterface("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(resolveInterface("localhost"), "localhost");
  EXPECT_THROW(resolveInterface("no-such-iface.invalid"), InvalidArgument);
  EXPECT_THROW(resolveInterface(""), InvalidArgument);
}

class SocketLoopback : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      listener_ = listenOn(GetParam(), 0);
    } catch (const Error& e) {
      GTEST_SKIP() << GetParam() << " unavailable: " << e.what();
    }
  }
  Fd listener_;
};

TEST_P(SocketLoopback, ConnectAcceptAndAddressesAreConsistent) {
  const std::uint16_t port = localPort(listener_.get());
  ASSERT_NE(port, 0);
  EXPECT_EQ(localHost(listener_.get()), GetParam());
  Fd client = connectTo(GetParam(), port, Deadline::after(seconds(5)));
  Fd server = acceptOne(listener_.get(), Deadline::after(seconds(5)));
  EXPECT_EQ(peerAddress(server.get()), joinHostPort(GetParam(), localPort(client.get())));
  EXPECT_EQ(peerAddress(client.get()), joinHostPort(GetParam(), port));
  EXPECT_TRUE(closeOnExec(listener_.get()));
  EXPECT_TRUE(closeOnExec(client.get()));
  EXPECT_TRUE(closeOnExec(server.get()));
}

TEST_P(SocketLoopback, LargeBuffersCrossBothWaysAtOnce) {
  const std::uint16_t port = localPort(listener_.get());
  Fd client = connectTo(GetParam(), port, Deadline::after(seconds(5)));
  Fd server = acceptOne(listener_.get(), Deadline::after(seconds(5)));
  constexpr std::size_t kBytes = 8 << 20;  // far more than the socket buffers: needs full duplex
  std::vector<std::uint8_t> a(kBytes), b(kBytes), ra(kBytes), rb(kBytes);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 100);
  setNonBlocking(server.get(), true);  // both kinds of socket work
  auto peer = spawn([&] {
    auto w = spawn([&] { writeAll(server.get(), b.data(), b.size(), Deadline::after(seconds(30))); });
    readAll(server.get(), ra.data(), ra.size(), Deadline::after(seconds(30)));
    w.join();
  });
  auto w = spawn([&] { writeAll(client.get(), a.data(), a.size(), Deadline::after(seconds(30))); });
  readAll(client.get(), rb.data(), rb.size(), Deadline::after(seconds(30)));
  w.join();
  peer.join();
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

TEST_P(SocketLoopback, ReadTimesOutAndReportsClosedPeers) {
  const std::uint16_t port = localPort(listener_.get());
  Fd client = connectTo(GetParam(), port, Deadline::after(seconds(5)));
  Fd server = acceptOne(listener_.get(), Deadline::after(seconds(5)));
  std::uint8_t buf[16];
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(readAll(client.get(), buf, sizeof(buf), Deadline::after(milliseconds(150))), TimeoutError);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(140));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));

  writeAll(server.get(), buf, 4, Deadline::after(seconds(1)));
  server.reset();
  // Four bytes arrive, then EOF in the middle of the 16 asked for.
  EXPECT_THROW(readAll(client.get(), buf, sizeof(buf), Deadline::after(seconds(5))), ConnectionClosed);
  // Writing to a closed peer fails with ConnectionClosed, not SIGPIPE.
  std::vector<std::uint8_t> big(4 << 20);
  EXPECT_THROW(
      {
        for (int i = 0; i < 8; ++i)
          writeAll(client.get(), big.data(), big.size(), Deadline::after(seconds(5)));
      },
      ConnectionClosed);
}

TEST_P(SocketLoopback, ConnectRetriesUntilTheServerListens) {
  const std::string host = GetParam();
  listener_.reset();
  const std::uint16_t port = freePort(host);
  Fd late;
  auto starter = spawn([&] {
    std::this_thread::sleep_for(milliseconds(300));
    late = listenOn(host, port);
  });
  const auto start = std::chrono::steady_clock::now();
  Fd client = connectTo(host, port, Deadline::after(seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  starter.join();
  Fd server = acceptOne(late.get(), Deadline::after(seconds(5)));
  const std::uint32_t word = 0xfeedbeef;
  writeAll(client.get(), &word, sizeof(word), Deadline::after(seconds(1)));
  std::uint32_t got = 0;
  readAll(server.get(), &got, sizeof(got), Deadline::after(seconds(1)));
  EXPECT_EQ(got, word);
}

TEST_P(SocketLoopback, ConnectTimesOutNamingTheAddress) {
  const std::string host = GetParam();
  listener_.reset();
  const std::uint16_t port = freePort(host);
  const auto start = std::chrono::steady_clock::now();
  try {
    connectTo(host, port, Deadline::after(milliseconds(250)));
    ADD_FAILURE() << "connected to a port nobody listens on";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(joinHostPort(host, port)), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(240));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
}

TEST_P(SocketLoopback, AcceptTimesOut) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(acceptOne(listener_.get(), Deadline::after(milliseconds(100))), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
}

INSTANTIATE_TEST_SUITE_P(Loopback, SocketLoopback, ::testing::Values("127.0.0.1", "::1"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "::1" ? std::string("IPv6") : std::string("IPv4");
                         });

TEST(Socket, ListenOnAnUnresolvableHostIsAnInvalidArgument) {
  EXPECT_THROW(listenOn("no-such-host.invalid", 0), InvalidArgument);
}

TEST(Socket, ListenOnAPortInUseIsASystemError) {
  Fd first = listenOn("127.0.0.1", 0);
  EXPECT_THROW(listenOn("127.0.0.1", localPort(first.get())), SystemError);
}

}  // namespace
}  // namespace gyre::net
