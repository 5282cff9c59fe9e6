// The TCP store under hostile and broken clients: every one is refused, counted and logged, and
// good clients are served throughout.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <random>
#include <thread>

#include "common/auth.h"
#include "common/socket.h"
#include "gyre/errors.h"
#include "support/flood.h"
#include "support/ranks.h"
#include "gyre/store.h"
#include "rendezvous/host_store.h"
#include "rendezvous/network_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/wire.h"

namespace gyre {
namespace {

using test::spawn;

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "the-job-secret";

class TcpStoreSecurity : public ::testing::Test {
 protected:
  void SetUp() override { server_ = createTcpStoreServer(kSecret); }

  net::Fd rawConnect() {
    const auto [host, port] = net::splitHostPort(server_->address());
    return net::connectTo(host, port, Deadline::after(seconds(5)));
  }

  net::Fd authenticatedConnect() {
    net::Fd fd = rawConnect();
    auth::handshakeAsClient(fd.get(), kSecret, rendezvous::kStoreAuthContext, Deadline::after(seconds(5)));
    return fd;
  }

  bool waitForRefused(std::uint64_t n, milliseconds within = milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (server_->refusedConnections() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  }

  // The server must close fd promptly: a read sees EOF/reset, not a time-out.
  static void expectClosedByServer(int fd) {
    std::uint8_t byte = 0;
    EXPECT_THROW(net::readAll(fd, &byte, 1, Deadline::after(seconds(4))), net::ConnectionClosed);
  }

  // A fresh good client can still use the store.
  void expectServesGoodClients() {
    static int round = 0;
    const std::string key = "good" + std::to_string(round++);
    auto client = connectTcpStore(server_->address(), kSecret, seconds(5));
    client->setString(key, "fine");
    EXPECT_EQ(client->getString(key, milliseconds(2000)), "fine");
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreSecurity, WrongSecretIsRefusedAndCounted) {
  EXPECT_THROW(connectTcpStore(server_->address(), "not-the-secret", seconds(5)), ProtocolError);
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
  EXPECT_EQ(server_->refusedConnections(), 1u);
}

TEST_F(TcpStoreSecurity, ForgedProofIsRefused) {
  // A client that skips checking the server and sends a made-up proof.
  net::Fd fd = rawConnect();
  std::uint8_t hello[21] = {'G', 'Y', 'R', '1', 'C'};
  net::writeAll(fd.get(), hello, sizeof(hello), Deadline::after(seconds(2)));
  std::uint8_t reply[53];
  net::readAll(fd.get(), reply, sizeof(reply), Deadline::after(seconds(2)));
  std::uint8_t proof[32] = {};
  net::writeAll(fd.get(), proof, sizeof(proof), Deadline::after(seconds(2)));
  expectClosedByServer(fd.get());
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, RightSecretForAnotherProtocolIsRefused) {
  net::Fd fd = rawConnect();
  EXPECT_THROW(auth::handshakeAsClient(fd.get(), kSecret, "transport/world", Deadline::after(seconds(5))),
               ProtocolError);
  fd.reset();  // as a real client does once the server fails to prove itself
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, GarbageBytesAreRefused) {
  net::Fd fd = rawConnect();
  std::vector<std::uint8_t> garbage(1000);
  std::mt19937 rng(7);
  for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
  garbage[0] = 'X';  // never the magic
  net::writeAll(fd.get(), garbage.data(), garbage.size(), Deadline::after(seconds(2)));
  expectClosedByServer(fd.get());
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, HttpRequestIsRefused) {
  net::Fd fd = rawConnect();
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  net::writeAll(fd.get(), http.data(), http.size(), Deadline::after(seconds(2)));
  expectClosedByServer(fd.get());
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, TruncatedHelloIsRefused) {
  {
    net::Fd fd = rawConnect();
    const std::uint8_t partial[10] = {'G', 'Y', 'R', '1', 'C'};
    net::writeAll(fd.get(), partial, sizeof(partial), Deadline::after(seconds(2)));
  }  // closed mid-hello
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, TruncatedFramesAfterAuthenticationAreRefused) {
  {
    net::Fd fd = authenticatedConnect();
    const std::uint8_t partialHeader[5] = {'G', 'S', 'T', '1', 0};
    net::writeAll(fd.get(), partialHeader, sizeof(partialHeader), Deadline::after(seconds(2)));
  }
  EXPECT_TRUE(waitForRefused(1));
  {
    net::Fd fd = authenticatedConnect();
    rendezvous::Request request{rendezvous::Command::kSet, {"key"}, Store::Bytes(100, 1), {}, 0};
    auto frame = rendezvous::encodeFrame(request);
    net::writeAll(fd.get(), frame.data(), frame.size() / 2, Deadline::after(seconds(2)));
  }
  EXPECT_TRUE(waitForRefused(2));
  expectServesGoodClients();
  // The half-sent set never took effect.
  auto client = connectTcpStore(server_->address(), kSecret, seconds(5));
  EXPECT_FALSE(client->check({"key"}));
}

TEST_F(TcpStoreSecurity, MalformedFrameBodyIsRefused) {
  net::Fd fd = authenticatedConnect();
  // A well-framed body whose key claims 1 GiB: refused without reading or allocating it.
  std::vector<std::uint8_t> body;
  rendezvous::ByteWriter writer(body);
  writer.u8(static_cast<std::uint8_t>(rendezvous::Command::kGet));
  writer.u32(1);
  writer.u32(1u << 30);
  std::vector<std::uint8_t> frame(rendezvous::kFrameHeaderBytes);
  rendezvous::putU32(frame.data(), rendezvous::kFrameMagic);
  rendezvous::putU32(frame.data() + 4, static_cast<std::uint32_t>(body.size()));
  frame.insert(frame.end(), body.begin(), body.end());
  net::writeAll(fd.get(), frame.data(), frame.size(), Deadline::after(seconds(2)));
  expectClosedByServer(fd.get());
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, HugeLengthFieldIsRefusedAtOnce) {
  net::Fd fd = authenticatedConnect();
  std::uint8_t header[rendezvous::kFrameHeaderBytes];
  rendezvous::putU32(header, rendezvous::kFrameMagic);
  rendezvous::putU32(header + 4, 0xffffffffu);
  const auto start = std::chrono::steady_clock::now();
  net::writeAll(fd.get(), header, sizeof(header), Deadline::after(seconds(2)));
  // Refused on the header alone: the server neither waits for 4 GiB nor allocates it.
  expectClosedByServer(fd.get());
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
  EXPECT_TRUE(waitForRefused(1));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, SilentClientsDoNotBlockGoodClients) {
  net::Fd silent = rawConnect();               // never says hello
  net::Fd idle = authenticatedConnect();       // authenticated, then silent
  net::Fd halfFrame = authenticatedConnect();  // stops in the middle of a frame
  const std::uint8_t partial[3] = {'G', 'S', 'T'};
  net::writeAll(halfFrame.get(), partial, sizeof(partial), Deadline::after(seconds(2)));
  const auto start = std::chrono::steady_clock::now();
  expectServesGoodClients();
  // Well under the 5 s a server stuck on the silent client would take.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
  // The client that never authenticated is dropped after the handshake time-out (5 s).
  EXPECT_TRUE(waitForRefused(1, milliseconds(9000)));
  expectClosedByServer(silent.get());
  expectServesGoodClients();
}

// Hundreds of idle, slow and garbage connections held open: good clients are still served at
// once (the 64-slot handshake table this replaced refused them), and no thread is spent on any.
TEST_F(TcpStoreSecurity, AFloodOfIdleAndSlowConnectionsDoesNotKeepGoodClientsOut) {
  const int threadsBefore = test::threadCount();
  test::Flood flood(server_->address(), {.idle = 300, .slow = 100, .garbage = 50});
  EXPECT_LE(test::threadCount(), threadsBefore + 2);
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    expectServesGoodClients();
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2));
  }
  EXPECT_TRUE(waitForRefused(50));  // the garbage, at once; the idle ones at their time-out
}

TEST_F(TcpStoreSecurity, ManyBadClientsAtOnce) {
  std::vector<net::Fd> bad;
  for (int i = 0; i < 20; ++i) {
    bad.push_back(rawConnect());
    const std::uint8_t junk[32] = {static_cast<std::uint8_t>(i)};
    net::writeAll(bad.back().get(), junk, sizeof(junk), Deadline::after(seconds(2)));
  }
  expectServesGoodClients();
  EXPECT_TRUE(waitForRefused(20));
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, ParkedGetDoesNotBlockOtherClients) {
  auto waiter = connectTcpStore(server_->address(), kSecret, seconds(5));
  auto other = connectTcpStore(server_->address(), kSecret, seconds(5));
  std::string got;
  auto t = spawn([&] { got = waiter->getString("later", milliseconds(10000)); });
  std::this_thread::sleep_for(milliseconds(50));
  for (int i = 0; i < 20; ++i) other->setString("busy" + std::to_string(i), "x");
  EXPECT_TRUE(other->check({"busy19"}));
  other->setString("later", "now");
  t.join();
  EXPECT_EQ(got, "now");
}

double processCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

TEST_F(TcpStoreSecurity, ClientLeavingWhileParkedIsNoticedWithoutSpinning) {
  {
    net::Fd fd = authenticatedConnect();
    auto frame =
        rendezvous::encodeFrame(rendezvous::Request{rendezvous::Command::kGet, {"absent"}, {}, {}, 20000});
    net::writeAll(fd.get(), frame.data(), frame.size(), Deadline::after(seconds(2)));
    std::this_thread::sleep_for(milliseconds(50));  // parked on the server
  }                                                 // the client leaves while parked
  const double before = processCpuSeconds();
  std::this_thread::sleep_for(milliseconds(500));
  // A server polling a dead parked socket in a loop would burn ~0.5 s of CPU here.
  EXPECT_LT(processCpuSeconds() - before, 0.2);
  EXPECT_EQ(server_->refusedConnections(), 0u);
  expectServesGoodClients();
}

TEST_F(TcpStoreSecurity, ClientTimeoutLeavesTheConnectionUsable) {
  auto client = connectTcpStore(server_->address(), kSecret, seconds(5));
  EXPECT_THROW(client->getString("missing", milliseconds(100)), TimeoutError);
  client->setString("present", "yes");
  EXPECT_EQ(client->getString("present", milliseconds(1000)), "yes");
}

TEST_F(TcpStoreSecurity, ServerGoneGivesAClearErrorNotAHang) {
  auto client = connectTcpStore(server_->address(), kSecret, seconds(5));
  client->setString("k", "v");
  auto killer = spawn([&] {
    std::this_thread::sleep_for(milliseconds(100));
    server_.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  try {
    client->get("never", milliseconds(20000));
    ADD_FAILURE() << "get returned after the server was destroyed";
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "expected a connection error, got a time-out: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closed the connection"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  killer.join();
  EXPECT_THROW(client->setString("k", "v2"), Error);
}

TEST(TcpStoreClient, ConnectTimesOutWhenNoServerListens) {
  auto probe = net::listenOn("127.0.0.1", 0);
  const std::uint16_t port = net::localPort(probe.get());
  probe.reset();  // nothing listens there now
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(connectTcpStore("127.0.0.1:" + std::to_string(port), kSecret, milliseconds(300)),
               TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
}

TEST(TcpStoreClient, ConnectsToAServerThatStartsLater) {
  auto probe = net::listenOn("127.0.0.1", 0);
  const std::uint16_t port = net::localPort(probe.get());
  probe.reset();
  std::unique_ptr<TcpStoreServer> server;
  auto starter = spawn([&] {
    std::this_thread::sleep_for(milliseconds(300));
    server = createTcpStoreServer(kSecret, "127.0.0.1", port);
  });
  auto client = connectTcpStore("127.0.0.1:" + std::to_string(port), kSecret, seconds(10));
  starter.join();
  client->setString("x", "y");
  EXPECT_EQ(client->getString("x", milliseconds(1000)), "y");
}

TEST(TcpStoreClient, ReportsTheLocalAddressOfItsRouteToTheServer) {
  auto server = createTcpStoreServer(kSecret, "127.0.0.1");
  auto client = connectTcpStore(server->address(), kSecret, seconds(5));
  const auto* network = dynamic_cast<const rendezvous::NetworkStore*>(client.get());
  ASSERT_NE(network, nullptr);
  EXPECT_EQ(network->localAddress(), "127.0.0.1");
  auto prefixed = createPrefixStore("p/", client);
  EXPECT_EQ(dynamic_cast<const rendezvous::NetworkStore&>(*prefixed).localAddress(), "127.0.0.1");
  auto hosted = rendezvous::hostTcpStore(kSecret, "127.0.0.1", 0);
  EXPECT_EQ(dynamic_cast<const rendezvous::NetworkStore&>(*hosted).localAddress(), "127.0.0.1");
}

TEST(TcpStoreServer, ListensOnIpv6Loopback) {
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = createTcpStoreServer(kSecret, "::1");
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback: " << e.what();
  }
  EXPECT_EQ(server->address(), "[::1]:" + std::to_string(server->port()));
  auto client = connectTcpStore(server->address(), kSecret, seconds(5));
  EXPECT_EQ(dynamic_cast<const rendezvous::NetworkStore&>(*client).localAddress(), "::1");
  client->setString("v6", "works");
  EXPECT_EQ(client->getString("v6", milliseconds(1000)), "works");
}

}  // namespace
}  // namespace gyre
