// The AuthGate in front of every listening socket: real clients get in through a flood of idle,
// slow and garbage connections, no thread is spent per pending connection, the oldest pending
// handshake is evicted when the gate (or one source) is full, and clients retry a connection
// closed under them.
#include "common/auth_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/auth.h"
#include "common/mutex.h"
#include "gyre/errors.h"
#include "support/flood.h"

namespace gyre::auth {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "gate-secret";
constexpr char kContext[] = "test";

// A listener with a gate that counts the connections it hands on.
struct Gated {
  explicit Gated(milliseconds timeout = seconds(5), std::size_t maxPending = 4096, std::size_t perSource = 1024) {
    GateOptions o{.secret = kSecret, .context = kContext, .name = "test gate"};
    o.handshakeTimeout = timeout;
    o.maxPending = maxPending;
    o.maxPendingPerSource = perSource;
    gate = std::make_unique<AuthGate>(listener.get(), o, [this](net::Fd, const std::string&) { ++handedOn; });
  }
  std::string address() const { return net::joinHostPort("127.0.0.1", net::localPort(listener.get())); }
  net::Fd connect(Deadline deadline = Deadline::after(seconds(5))) const {
    return connectAuthenticated("127.0.0.1", net::localPort(listener.get()), kSecret, kContext, deadline);
  }
  bool waitFor(const std::function<bool()>& done, milliseconds within = milliseconds(5000)) const {
    const Deadline deadline = Deadline::after(within);
    while (!done())
      if (deadline.expired()) return false; else std::this_thread::sleep_for(milliseconds(5));
    return true;
  }

  net::Fd listener = net::listenOn("127.0.0.1", 0);
  std::atomic<int> handedOn{0};
  std::unique_ptr<AuthGate> gate;
};

TEST(AuthGate, RealClientsGetInThroughAFloodWithoutAThreadPerConnection) {
  Gated g;
  const int threadsBefore = test::threadCount();
  test::Flood flood(g.address(), {.idle = 400, .slow = 100, .garbage = 100});
  EXPECT_LE(test::threadCount(), threadsBefore + 2);  // the flood's own trickle thread, no more
  for (int i = 0; i < 5; ++i) {
    const auto begin = Clock::now();
    EXPECT_NO_THROW(g.connect());
    EXPECT_LT(Clock::now() - begin, seconds(2)) << "client " << i;
  }
  EXPECT_TRUE(g.waitFor([&] { return g.handedOn.load() == 5; }));
  EXPECT_TRUE(g.waitFor([&] { return g.gate->stats().refused >= 100; })) << "the garbage is refused at once";
  EXPECT_EQ(g.gate->stats().authenticated, 5u);
}

TEST(AuthGate, AFullGateEvictsTheOldestPendingHandshakeNotTheNewest) {
  Gated g(seconds(30), 8);
  test::Flood flood(g.address(), {.idle = 8});
  ASSERT_TRUE(g.waitFor([&] { return g.gate->stats().accepted == 8; }));
  EXPECT_NO_THROW(g.connect());
  EXPECT_GE(g.gate->stats().evicted, 1u);
  // (The client is done once it sent its proof; the gate checks it just after.)
  EXPECT_TRUE(g.waitFor([&] { return g.gate->stats().authenticated == 1; }));
}

TEST(AuthGate, OneSourceCannotHoldMoreThanItsShare) {
  Gated g(seconds(30), 1000, 16);
  test::Flood flood(g.address(), {.idle = 40});
  ASSERT_TRUE(g.waitFor([&] { return g.gate->stats().accepted == 40; }));
  EXPECT_EQ(g.gate->stats().evicted, 24u);  // each beyond 16 evicted its source's oldest
  EXPECT_NO_THROW(g.connect());
}

TEST(AuthGate, APendingHandshakeTimesOutAndIsClosed) {
  Gated g(milliseconds(200));
  net::Fd idle = net::connectTo("127.0.0.1", net::localPort(g.listener.get()), Deadline::after(seconds(5)));
  std::uint8_t byte = 0;
  EXPECT_THROW(net::readAll(idle.get(), &byte, 1, Deadline::after(seconds(5))), net::ConnectionClosed);
  EXPECT_EQ(g.gate->stats().refused, 1u);
}

TEST(AuthGate, AWrongSecretFailsAtOnceAndIsNotRetried) {
  Gated g;
  const auto begin = Clock::now();
  EXPECT_THROW(connectAuthenticated("127.0.0.1", net::localPort(g.listener.get()), "wrong", kContext,
                                    Deadline::after(seconds(10))),
               ProtocolError);
  EXPECT_LT(Clock::now() - begin, seconds(2));
  EXPECT_EQ(g.handedOn.load(), 0);
}

TEST(AuthGate, AClientCutOffDuringTheHandshakeRetriesUntilItGetsIn) {
  net::Fd listener = net::listenOn("127.0.0.1", 0);
  const std::uint16_t port = net::localPort(listener.get());
  std::atomic<int> handedOn{0};
  std::unique_ptr<AuthGate> gate;
  // The first three connections are closed unanswered, as an overloaded server sheds them; then
  // the gate takes over the listener.
  std::thread shedder([&] {
    for (int i = 0; i < 3; ++i) net::Fd shed = net::acceptOne(listener.get(), Deadline::after(seconds(10)));
    gate = std::make_unique<AuthGate>(listener.get(), GateOptions{.secret = kSecret, .context = kContext, .name = "shedding gate"},
                                      [&](net::Fd, const std::string&) { ++handedOn; });
  });
  EXPECT_NO_THROW(connectAuthenticated("127.0.0.1", port, kSecret, kContext, Deadline::after(seconds(10))));
  shedder.join();
  const Deadline deadline = Deadline::after(seconds(5));
  while (handedOn.load() == 0 && !deadline.expired()) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(handedOn.load(), 1);
}

}  // namespace
}  // namespace gyre::auth
