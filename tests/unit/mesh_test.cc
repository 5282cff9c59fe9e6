// The transport contract: every transport (TCP, shared memory) must pass these, as ranks that
// are threads of one process.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "gyre/errors.h"
#include "gyre/store.h"
#include "support/flood.h"
#include "support/ranks.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/socket.h"
#include "transport/mesh.h"

namespace gyre::transport {
namespace {

using test::runThreads;

class MeshTest : public ::testing::TestWithParam<Transport> {
 protected:
  MeshOptions options(int rank, int size, std::string name = "mesh") const {
    MeshOptions o;
    o.rank = rank;
    o.size = size;
    o.transport = GetParam();
    o.secret = "secret";
    o.name = std::move(name);
    o.connectTimeout = std::chrono::seconds(20);
    o.shmRingBytes = 64 * 1024;  // small rings: messages much larger than a ring must still flow
    return o;
  }
  std::shared_ptr<Store> store_ = createMemoryStore();
};

std::vector<std::uint8_t> pattern(std::size_t n, int seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 31 + seed * 7 + (i >> 9));
  return v;
}

TEST_P(MeshTest, ReportsItsTransport) {
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    EXPECT_EQ(mesh->transportTo(1 - rank), GetParam() == Transport::kAuto ? Transport::kShm : GetParam());
  });
}

// Every rank sends a large buffer to every other rank at once: needs full duplex and no
// head-of-line blocking, since each message is far larger than a ring.
TEST_P(MeshTest, AllPairsExchangeLargeMessagesConcurrently) {
  constexpr int kSize = 4;
  constexpr std::size_t kBytes = (1 << 20) + 13;
  runThreads(kSize, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, kSize));
    auto mine = pattern(kBytes, rank);
    std::vector<std::vector<std::uint8_t>> got(kSize, std::vector<std::uint8_t>(kBytes));
    std::vector<Op> ops;
    for (int r = 0; r < kSize; ++r) {
      if (r == rank) continue;
      ops.push_back(Op::send(r, mine.data(), kBytes));
      ops.push_back(Op::recv(r, got[r].data(), kBytes));
    }
    mesh->run(ops, Deadline::after(std::chrono::seconds(20)));
    for (int r = 0; r < kSize; ++r) {
      if (r != rank) {
        EXPECT_EQ(got[r], pattern(kBytes, r)) << "from rank " << r;
      }
    }
  });
}

// Messages of odd sizes back to back keep their boundaries (shared-memory padding).
TEST_P(MeshTest, ManyOddSizedMessagesKeepTheirOrder) {
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    const int peer = 1 - rank;
    for (std::size_t n : {1, 3, 64, 65, 4095, 70001, 0, 7}) {
      auto out = pattern(n, rank + static_cast<int>(n));
      std::vector<std::uint8_t> in(n);
      std::vector<Op> ops{Op::send(peer, out.data(), n), Op::recv(peer, in.data(), n)};
      mesh->run(ops, Deadline::after(std::chrono::seconds(10)));
      EXPECT_EQ(in, pattern(n, peer + static_cast<int>(n))) << n << " bytes";
    }
  });
}

TEST_P(MeshTest, RecvReduceWithOtherOperand) {
  constexpr std::size_t kCount = 300001;
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    std::vector<float> mine(kCount), base(kCount), out(kCount, -1);
    for (std::size_t i = 0; i < kCount; ++i) mine[i] = float(i % 1000) + rank, base[i] = 0.5f;
    std::vector<Op> ops{Op::send(1 - rank, mine.data(), kCount * 4),
                        Op::recvReduce(1 - rank, out.data(), kCount * 4, DataType::kFloat32, ReduceOp::kSum,
                                       base.data())};
    mesh->run(ops, Deadline::after(std::chrono::seconds(10)));
    for (std::size_t i = 0; i < kCount; ++i) ASSERT_EQ(out[i], float(i % 1000) + (1 - rank) + 0.5f) << i;
  });
}

// A small receive takes the start of the next one with it (TCP: into its buffer, or into the
// staging buffer when it reduces): those bytes must reach the right ops, in order, whether the
// next op is a plain receive, a receive-reduce of any element size, or a receive held back by
// `after`, and a later run() must find the stream where this one left it.
TEST_P(MeshTest, SmallReceivesHandTheBytesBehindThemToTheRightOps) {
  constexpr std::size_t kFloats = 1000, kLongs = 513, kTail = 40000;
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    const auto deadline = Deadline::after(std::chrono::seconds(20));
    const auto one = pattern(1, 1), two = pattern(2, 2), three = pattern(3, 3), seven = pattern(7, 7);
    const auto tail = pattern(kTail, 5);
    std::vector<float> floats(kFloats);
    std::vector<std::int64_t> longs(kLongs);
    std::iota(floats.begin(), floats.end(), 0.25f);
    std::iota(longs.begin(), longs.end(), std::int64_t{1} << 40);
    if (rank == 0) {
      std::vector<Op> ops{Op::send(1, one.data(), 1),
                          Op::send(1, three.data(), 3),
                          Op::send(1, floats.data(), kFloats * 4),
                          Op::send(1, seven.data(), 7),
                          Op::send(1, longs.data(), kLongs * 8),
                          Op::send(1, two.data(), 2),
                          Op::send(1, tail.data(), kTail),
                          Op::send(1, three.data(), 3),
                          Op::send(1, floats.data(), kFloats * 4)};
      mesh->run(ops, deadline);
      return;
    }
    std::vector<std::uint8_t> gotOne(1), gotTwo(2), gotThree(3), gotSeven(7), gotTail(kTail);
    std::vector<float> sums(kFloats, 1.0f), later(kFloats, 2.0f);
    std::vector<std::int64_t> maxima(kLongs, 0);
    // Behind a 2-byte receive, the 40,000-byte tail goes straight into its buffer; it also
    // waits, byte for byte, on the float reduce (`after`).
    std::vector<Op> ops{Op::recv(0, gotOne.data(), 1),
                        Op::recv(0, gotThree.data(), 3),
                        Op::recvReduce(0, sums.data(), kFloats * 4, DataType::kFloat32, ReduceOp::kSum),
                        Op::recv(0, gotSeven.data(), 7),
                        Op::recvReduce(0, maxima.data(), kLongs * 8, DataType::kInt64, ReduceOp::kMax),
                        Op::recv(0, gotTwo.data(), 2),
                        Op::recv(0, gotTail.data(), kTail, /*after=*/2),
                        Op::recv(0, gotThree.data(), 3)};
    mesh->run(ops, deadline);
    std::vector<Op> next{Op::recvReduce(0, later.data(), kFloats * 4, DataType::kFloat32, ReduceOp::kSum)};
    mesh->run(next, deadline);
    EXPECT_EQ(gotOne, one);
    EXPECT_EQ(gotThree, three);
    EXPECT_EQ(gotSeven, seven);
    EXPECT_EQ(gotTwo, two);
    EXPECT_EQ(gotTail, tail);
    for (std::size_t i = 0; i < kFloats; ++i) {
      ASSERT_EQ(sums[i], floats[i] + 1.0f) << i;
      ASSERT_EQ(later[i], floats[i] + 2.0f) << i;
    }
    EXPECT_EQ(maxima, longs);
  });
}

// A chain 0 -> 1 -> 2 where rank 1 forwards each byte as soon as it arrives (`after`).
TEST_P(MeshTest, AfterDependencyPipelinesForwarding) {
  constexpr std::size_t kBytes = 3 << 20;
  runThreads(3, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 3));
    std::vector<std::uint8_t> buf = rank == 0 ? pattern(kBytes, 9) : std::vector<std::uint8_t>(kBytes);
    std::vector<Op> ops;
    if (rank == 0) ops.push_back(Op::send(1, buf.data(), kBytes));
    if (rank == 1) {
      ops.push_back(Op::recv(0, buf.data(), kBytes));
      ops.push_back(Op::send(2, buf.data(), kBytes, /*after=*/0));
    }
    if (rank == 2) ops.push_back(Op::recv(1, buf.data(), kBytes));
    mesh->run(ops, Deadline::after(std::chrono::seconds(20)));
    EXPECT_EQ(buf, pattern(kBytes, 9));
  });
}

TEST_P(MeshTest, TimesOutNamingThePeer) {
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    if (rank == 0) {
      std::uint8_t byte = 0;
      try {
        mesh->recv(1, &byte, 1, Deadline::after(std::chrono::milliseconds(300)));
        ADD_FAILURE() << "no time-out";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
      }
      // The mesh is broken now: later calls fail at once.
      EXPECT_THROW(mesh->recv(1, &byte, 1, Deadline::after(std::chrono::seconds(5))), TimeoutError);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rank == 1 ? 600 : 0));
  });
}

TEST_P(MeshTest, PeerThatClosesFailsAWaitingReceive) {
  runThreads(2, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 2));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      mesh.reset();  // closes with a goodbye
      return;
    }
    std::uint8_t byte = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      mesh->recv(1, &byte, 1, Deadline::after(std::chrono::seconds(30)));
      ADD_FAILURE() << "no error";
    } catch (const PeerLostError& e) {
      EXPECT_EQ(e.rank(), 1);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  });
}

TEST_P(MeshTest, AbortReachesEveryPeer) {
  runThreads(3, [&](int rank) {
    auto mesh = Mesh::connect(*store_, options(rank, 3));
    if (rank == 2) {
      mesh->abort(7, "simulated loss");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    std::uint8_t byte = 0;
    try {
      mesh->recv(1 - rank, &byte, 1, Deadline::after(std::chrono::seconds(30)));
      ADD_FAILURE() << "no error";
    } catch (const PeerLostError& e) {
      EXPECT_EQ(e.rank(), 7) << e.what();
    }
  });
}

TEST_P(MeshTest, WrongSecretNeverConnects) {
  std::atomic<int> failures{0};
  runThreads(2, [&](int rank) {
    auto o = options(rank, 2, "wrong");
    o.connectTimeout = std::chrono::milliseconds(1500);
    if (rank == 1) o.secret = "not the secret";
    try {
      Mesh::connect(*store_, o);
    } catch (const Error&) {
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
}

// Ranks started with different world sizes fail at once, every one of them, naming both sizes,
// whichever arrives first: not after the start time-out with "timed out waiting".
TEST_P(MeshTest, RanksThatDisagreeOnTheWorldSizeAllFailAtOnceNamingBoth) {
  struct Case {
    std::vector<int> sizes;  // each thread's world size; thread i is rank i
    int first;               // the thread that arrives first
  };
  const std::vector<Case> cases = {{{2, 3}, 0}, {{2, 3}, 1}, {{3, 3, 2}, 2}, {{3, 2, 3}, 0}, {{2, 2, 3}, 0}};
  int index = 0;
  for (const Case& c : cases) {
    const std::string name = "sizes" + std::to_string(index++);
    std::atomic<int> failures{0};
    const auto begin = Clock::now();
    runThreads(static_cast<int>(c.sizes.size()), [&](int rank) {
      if (rank != c.first) {
        while (!store_->check({name + "/mesh/size"})) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      auto o = options(rank, c.sizes[rank], name);
      if (rank >= o.size) o.rank = o.size - 1;  // a rank beyond its own world is refused earlier
      try {
        Mesh::connect(*store_, o);
        // With {2, 2, 3} and rank 2 last, ranks 0 and 1 form their world of 2.
        EXPECT_EQ(c.sizes[rank], c.sizes[c.first]) << name << " rank " << rank << " connected";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("disagree on the world size"), std::string::npos) << e.what();
        ++failures;
      }
    });
    EXPECT_GE(failures.load(), 1) << name;
    EXPECT_LT(Clock::now() - begin, std::chrono::seconds(10)) << name << ": waited out the start time-out";
  }
}

// A flood of idle, slow and garbage connections held on rank 0's listener before rank 1 connects:
// the mesh still forms, without a thread per connection (they were once handshaken one by one,
// each idle one holding the listener for 5 s).
TEST_P(MeshTest, AFloodOnTheListenerDoesNotKeepPeersOut) {
  std::atomic<bool> flooded{false};
  std::unique_ptr<test::Flood> flood;
  std::thread attacker([&] {
    const std::string record = store_->getString("flooded/mesh/0", std::chrono::seconds(20));
    flood = std::make_unique<test::Flood>(record.substr(0, record.find('|')),
                                          test::Flood::Counts{.idle = 200, .slow = 50, .garbage = 50});
    flooded = true;
  });
  const auto begin = Clock::now();
  runThreads(2, [&](int rank) {
    if (rank == 1)
      while (!flooded) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto mesh = Mesh::connect(*store_, options(rank, 2, "flooded"));
    int mine = rank + 10, theirs = 0;
    std::vector<Op> ops{Op::send(1 - rank, &mine, sizeof(mine)), Op::recv(1 - rank, &theirs, sizeof(theirs))};
    mesh->run(ops, Deadline::after(std::chrono::seconds(10)));
    EXPECT_EQ(theirs, 11 - rank);
  });
  attacker.join();
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(10));
}

// Hostile clients reach rank 0's listener before rank 1 does: garbage, a truncated hello, a huge
// length-looking header, a wrong secret, and a silent client. Each is refused and logged, and
// the real peer still connects and the mesh works.
TEST_P(MeshTest, HostileClientsAreRefusedAndSetUpCarriesOn) {
  std::atomic<bool> attacked{false};
  std::thread attacker([&] {
    const std::string record = store_->getString("hostile/mesh/0", std::chrono::seconds(20));
    const auto hostPort = net::splitHostPort(record.substr(0, record.find('|')));
    const auto& host = hostPort.first;  // not structured bindings: the lambda below captures them
    const auto& port = hostPort.second;
    const Deadline deadline = Deadline::after(std::chrono::seconds(5));
    auto sendRaw = [&](const std::string& bytes) {
      net::Fd fd = net::connectTo(host, port, deadline);
      if (!bytes.empty()) net::writeAll(fd.get(), bytes.data(), bytes.size(), deadline);
    };
    sendRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    sendRaw("GYR1C");                                  // truncated hello
    sendRaw(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + std::string(64, 'A'));
    {
      net::Fd silent = net::connectTo(host, port, deadline);  // says nothing, then leaves
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    try {
      net::Fd fd = net::connectTo(host, port, deadline);
      auth::handshakeAsClient(fd.get(), "wrong secret", "transport/hostile", deadline);
      ADD_FAILURE() << "a wrong secret was accepted";
    } catch (const Error&) {
    }
    attacked = true;
  });
  runThreads(2, [&](int rank) {
    if (rank == 1)
      while (!attacked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto mesh = Mesh::connect(*store_, options(rank, 2, "hostile"));
    int mine = rank + 10, theirs = 0;
    std::vector<Op> ops{Op::send(1 - rank, &mine, sizeof(mine)), Op::recv(1 - rank, &theirs, sizeof(theirs))};
    mesh->run(ops, Deadline::after(std::chrono::seconds(10)));
    EXPECT_EQ(theirs, 11 - rank);
  });
  attacker.join();
}

INSTANTIATE_TEST_SUITE_P(Transports, MeshTest, ::testing::Values(Transport::kTcp, Transport::kShm, Transport::kAuto),
                         [](const auto& param_info) { return std::string(toString(param_info.param)); });

}  // namespace
}  // namespace gyre::transport
