// The Communicator through its public API, ranks as threads: the correctness matrix for every
// transport and world size 1-8, async work, split, debug mode, time-outs and bad arguments.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/socket.h"
#include "gyre/gyre.h"
#include "support/matrix.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using test::runThreads;

CommunicatorOptions testOptions(Transport transport, std::string name = "world") {
  CommunicatorOptions o;
  o.transport = transport;
  o.secret = "test-secret";
  o.name = std::move(name);
  o.timeout = std::chrono::seconds(60);
  return o;
}

class MatrixTest : public ::testing::TestWithParam<std::tuple<Transport, int>> {};

TEST_P(MatrixTest, EveryCollectiveMatchesTheSerialReference) {
  const auto transport = std::get<0>(GetParam());  // not a structured binding: the lambda captures it
  const int size = std::get<1>(GetParam());
  auto store = createMemoryStore();
  const auto matrix = test::defaultMatrix();
  runThreads(size, [&](int rank) {
    auto comm = Communicator::create(store, rank, size, testOptions(transport));
    test::checkAllreduce(*comm, matrix);
    test::checkRootedAndGatherCollectives(*comm, matrix);
    test::checkPointToPoint(*comm);
  });
}

INSTANTIATE_TEST_SUITE_P(Threads, MatrixTest,
                         ::testing::Combine(::testing::Values(Transport::kShm, Transport::kTcp),
                                            ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8)),
                         [](const auto& param_info) {
                           return std::string(toString(std::get<0>(param_info.param))) + "_np" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

TEST(CommunicatorTest, ManyAsyncOperationsInFlightCompleteInOrder) {
  auto store = createMemoryStore();
  runThreads(4, [&](int rank) {
    auto comm = Communicator::create(store, rank, 4, testOptions(Transport::kAuto));
    constexpr int kOps = 16;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(10000));
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < kOps; ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), float(rank + k));
      works.push_back(comm->allreduceAsync(bufs[k].data(), bufs[k].data(), bufs[k].size()));
    }
    // A blocking call waits for the async ones submitted before it.
    float one = 1;
    comm->allreduce(&one, &one, 1);
    EXPECT_EQ(one, 4.0f);
    for (int k = 0; k < kOps; ++k) {
      EXPECT_TRUE(works[k]->isCompleted());
      EXPECT_TRUE(works[k]->wait(std::chrono::milliseconds(0)));
      EXPECT_EQ(works[k]->exception(), nullptr);
      EXPECT_EQ(bufs[k][0], float(0 + 1 + 2 + 3 + 4 * k));
    }
  });
}

TEST(CommunicatorTest, SplitFormsGroupsOrderedByKey) {
  auto store = createMemoryStore();
  runThreads(6, [&](int rank) {
    auto world = Communicator::create(store, rank, 6, testOptions(Transport::kAuto));
    const int color = rank == 5 ? -1 : rank % 2;
    auto sub = world->split(color, /*key=*/-rank);
    if (rank == 5) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    // Evens {0,2,4} and odds {1,3}, reversed by key.
    EXPECT_EQ(sub->size(), color == 0 ? 3 : 2);
    const int expectedRank = color == 0 ? (4 - rank) / 2 : (3 - rank) / 2;
    EXPECT_EQ(sub->rank(), expectedRank);
    int value = rank, sum = 0;
    sub->allreduce(&value, &sum, 1, AllreduceOptions{DataType::kInt32});
    EXPECT_EQ(sum, color == 0 ? 6 : 4);
  });
}

TEST(CommunicatorTest, DebugModeTurnsAMismatchIntoAnErrorNamingTheRanks) {
  auto store = createMemoryStore();
  runThreads(3, [&](int rank) {
    auto o = testOptions(Transport::kAuto);
    o.debugCollectives = true;
    auto comm = Communicator::create(store, rank, 3, o);
    std::vector<float> buf(16, 1.0f);
    try {
      comm->allreduce(buf.data(), buf.data(), rank == 2 ? 12 : 10);
      ADD_FAILURE() << "no mismatch reported on rank " << rank;
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
      EXPECT_NE(what.find("count=12"), std::string::npos) << what;
      EXPECT_NE(what.find("count=10"), std::string::npos) << what;
    }
    // The communicator is still usable.
    comm->allreduce(buf.data(), buf.data(), 10);
    EXPECT_EQ(buf[0], 3.0f);
    // A different op at the same point is caught too.
    try {
      if (rank == 0)
        comm->broadcast(buf.data(), 10);
      else
        comm->allreduce(buf.data(), buf.data(), 10);
      ADD_FAILURE() << "no mismatch reported on rank " << rank;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("broadcast"), std::string::npos) << e.what();
    }
    // Calls whose ranks give different sizes by design are not mismatches: allgatherv's parts
    // (with the same list of counts everywhere) and alltoallv's.
    const std::vector<std::size_t> counts = {1, 2, 3};
    std::vector<float> mine(counts[rank], static_cast<float>(rank)), all(6, -1.0f);
    comm->allgatherv(mine.data(), all.data(), counts);
    EXPECT_EQ(all, (std::vector<float>{0, 1, 1, 2, 2, 2}));
    const std::vector<std::size_t> sends(3, static_cast<std::size_t>(rank + 1)), recvs = {1, 2, 3};
    std::vector<float> out(3 * (rank + 1), static_cast<float>(rank)), in(6, -1.0f);
    comm->alltoallv(out.data(), sends, in.data(), recvs);
    EXPECT_EQ(in, (std::vector<float>{0, 1, 1, 2, 2, 2}));
  });
}

// Without debug mode too, ranks that make different calls get InvalidArgument, every one of them,
// naming both calls: not wrong numbers, a hang or a time-out. One rank differs in each case.
// (Not every mismatch can be seen from the first messages alone: two ranks that both think they
// are a broadcast's root receive nothing. Debug mode's fingerprints catch those.)
TEST(CommunicatorTest, MismatchedCallsAreAlwaysAnErrorOnEveryRank) {
  struct Case {
    const char* name;
    std::function<void(Communicator&, int rank, bool odd)> call;
    const char* needle;  // in every rank's message
  };
  const std::vector<Case> cases = {
      {"count", [](Communicator& c, int, bool odd) {
         std::vector<float> b(4096, 1.0f);
         c.allreduce(b.data(), b.data(), odd ? 4096 : 2048);
       }, "count=4096"},
      {"dtype", [](Communicator& c, int, bool odd) {
         std::vector<double> b(1024, 1.0);
         if (odd) {
           c.allreduce(b.data(), b.data(), 2048, {.dtype = DataType::kFloat32});
         } else {
           c.allreduce(b.data(), b.data(), 1024, {.dtype = DataType::kFloat64});
         }
       }, "float64"},
      {"op", [](Communicator& c, int, bool odd) {
         std::vector<float> b(1024, 1.0f);
         c.allreduce(b.data(), b.data(), 1024, {.op = odd ? ReduceOp::kMax : ReduceOp::kSum});
       }, "max"},
      {"type", [](Communicator& c, int, bool odd) {
         std::vector<float> b(1024, 1.0f);
         if (odd) {
           c.broadcast(b.data(), 1024);
         } else {
           c.allreduce(b.data(), b.data(), 1024);
         }
       }, "broadcast"},
  };
  for (Transport transport : {Transport::kTcp, Transport::kShm}) {
    for (int size : {2, 3, 4}) {
      for (const Case& c : cases) {
        auto store = createMemoryStore();
        std::atomic<int> caught{0};
        const auto begin = std::chrono::steady_clock::now();
        runThreads(size, [&](int rank) {
          auto o = testOptions(transport, std::string("mismatch-") + c.name);
          o.timeout = std::chrono::seconds(20);
          auto comm = Communicator::create(store, rank, size, o);
          try {
            c.call(*comm, rank, rank == size - 1);
            ADD_FAILURE() << c.name << " np=" << size << ": no error on rank " << rank;
          } catch (const InvalidArgument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("different collective calls"), std::string::npos) << what;
            EXPECT_NE(what.find(c.needle), std::string::npos) << c.name << ": " << what;
          } catch (const Error& e) {
            ADD_FAILURE() << c.name << " np=" << size << " rank " << rank << ": " << e.what();
          }
          ++caught;
          while (caught.load() < size) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10)) << c.name << " np=" << size;
      }
    }
  }
}

TEST(CommunicatorTest, TimeoutBreaksTheCommunicator) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = Communicator::create(store, rank, 2, testOptions(Transport::kAuto));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      return;
    }
    float x = 1;
    const auto start = std::chrono::steady_clock::now();
    AllreduceOptions o;
    o.timeout = std::chrono::milliseconds(200);
    EXPECT_THROW(comm->allreduce(&x, &x, 1, o), TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    EXPECT_THROW(comm->allreduce(&x, &x, 1), TimeoutError);
  });
}

TEST(CommunicatorTest, BadArgumentsAreRejectedAndLeaveTheCommunicatorUsable) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = Communicator::create(store, rank, 2, testOptions(Transport::kAuto));
    float x[4] = {1, 1, 1, 1};
    EXPECT_THROW(comm->broadcast(x, 4, BroadcastOptions{DataType::kFloat32, 2}), InvalidArgument);
    EXPECT_THROW(comm->allreduce(nullptr, x, 4), InvalidArgument);
    std::size_t counts[1] = {4};
    EXPECT_THROW(comm->allgatherv(x, x, counts), InvalidArgument);
    EXPECT_THROW(comm->send(x, 4, rank), InvalidArgument);
    EXPECT_THROW(comm->allreduce(x, x, SIZE_MAX / 2), InvalidArgument);
    comm->allreduce(x, x, 4);
    EXPECT_EQ(x[3], 2.0f);
  });
}

TEST(CommunicatorTest, MismatchedPointToPointIsReportedAndSkipped) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = Communicator::create(store, rank, 2, testOptions(Transport::kAuto));
    int v[3] = {rank, rank, rank};
    if (rank == 0) {
      comm->send(v, 3, 1, P2POptions{DataType::kInt32, 7});
      comm->send(v, 2, 1, P2POptions{DataType::kInt32, 8});
    } else {
      EXPECT_THROW(comm->recv(v, 3, 0, P2POptions{DataType::kInt32, 9}), InvalidArgument);
      comm->recv(v, 2, 0, P2POptions{DataType::kInt32, 8});
      EXPECT_EQ(v[0], 0);
    }
  });
}

// Every rank sends 16 MB to the next and receives from the one before, all at once: a send
// followed by a receive would block on the full transport buffers of both ends; sendRecv does not.
TEST(CommunicatorTest, SendRecvExchangesLargeMessagesAroundARingOnEveryTransport) {
  for (const Transport transport : {Transport::kTcp, Transport::kShm}) {
    auto store = createMemoryStore();
    runThreads(3, [&](int rank) {
      auto comm = Communicator::create(store, rank, 3, testOptions(transport, "ring"));
      const std::size_t n = std::size_t{4} << 20;
      std::vector<float> out(n, static_cast<float>(rank)), in(n, -1.0f);
      out[n - 1] = static_cast<float>(rank + 10);
      const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
      comm->sendRecv(out.data(), n, next, in.data(), n, prev, P2POptions{DataType::kFloat32, 5});
      EXPECT_EQ(in[0], static_cast<float>(prev));
      EXPECT_EQ(in[n - 1], static_cast<float>(prev + 10));
      // And asynchronously, the other way round.
      comm->sendRecvAsync(out.data(), 10, prev, in.data(), 10, next)->wait();
      EXPECT_EQ(in[9], static_cast<float>(next));
    });
  }
}

// Each half of a sendRecv is an ordinary message: a plain recv and send on the peer match it;
// a half may be left out (-1); a message of another tag or size is an error naming both.
TEST(CommunicatorTest, SendRecvHalvesMatchPlainMessagesAndAMismatchIsNamed) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = Communicator::create(store, rank, 2, testOptions(Transport::kAuto));
    int v[3] = {rank, rank, rank};
    int w[3] = {-1, -1, -1};
    if (rank == 0) {
      comm->sendRecv(v, 3, 1, nullptr, 0, -1, P2POptions{DataType::kInt32, 1});
      comm->sendRecv(nullptr, 0, -1, w, 2, 1, P2POptions{DataType::kInt32, 2});
      EXPECT_EQ(w[1], 1);
      EXPECT_EQ(w[2], -1);
      comm->send(v, 3, 1, P2POptions{DataType::kInt32, 3});
    } else {
      comm->recv(w, 3, 0, P2POptions{DataType::kInt32, 1});
      EXPECT_EQ(w[2], 0);
      comm->send(v, 2, 0, P2POptions{DataType::kInt32, 2});
      try {
        comm->sendRecv(nullptr, 0, -1, w, 3, 0, P2POptions{DataType::kInt32, 4});
        ADD_FAILURE() << "a message of tag 3 was taken for tag 4";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("expected a message with tag 4 and 12 bytes; the one that came has "
                                             "tag 3 and 12 bytes"),
                  std::string::npos)
            << e.what();
      }
    }
    EXPECT_THROW(comm->sendRecv(v, 1, rank, w, 1, -1), InvalidArgument);
    EXPECT_THROW(comm->sendRecv(v, 1, -1, w, 1, 2), InvalidArgument);
  });
}

// A batched exchange: every rank sends 8 MB each way around a ring and receives from both sides,
// all at once (a pipeline stage's activations forward and gradients backward), and two messages
// to one peer arrive in the order listed. Its messages are ordinary ones; a bad peer is named.
TEST(CommunicatorTest, ExchangeSendsAndReceivesSeveralMessagesAtOnce) {
  for (const Transport transport : {Transport::kTcp, Transport::kShm}) {
    auto store = createMemoryStore();
    runThreads(3, [&](int rank) {
      auto comm = Communicator::create(store, rank, 3, testOptions(transport, "exchange"));
      const std::size_t n = std::size_t{2} << 20;
      const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
      std::vector<float> toNext(n, static_cast<float>(rank)), toPrev(n, static_cast<float>(rank + 10));
      std::vector<float> fromPrev(n, -1), fromNext(n, -1);
      const P2PMessage sends[] = {{next, toNext.data(), n}, {prev, toPrev.data(), n}};
      const P2PMessage recvs[] = {{next, fromNext.data(), n}, {prev, fromPrev.data(), n}};
      comm->exchange(sends, recvs, P2POptions{DataType::kFloat32, 6});
      EXPECT_EQ(fromPrev[n - 1], static_cast<float>(prev));
      EXPECT_EQ(fromNext[0], static_cast<float>(next + 10));

      // Two messages to one peer, matched in order; the other end uses plain send and recv.
      int a[2] = {rank, rank}, b[3] = {rank * 10, rank * 10, rank * 10};
      if (rank == 0) {
        const P2PMessage two[] = {{1, a, 2}, {1, b, 3}};
        comm->exchangeAsync(two, {}, P2POptions{DataType::kInt32, 1})->wait();
      } else if (rank == 1) {
        int x[2] = {-1, -1}, y[3] = {-1, -1, -1};
        comm->recv(x, 2, 0, P2POptions{DataType::kInt32, 1});
        comm->recv(y, 3, 0, P2POptions{DataType::kInt32, 1});
        EXPECT_EQ(x[1], 0);
        EXPECT_EQ(y[2], 0);
      }
      const P2PMessage self[] = {{rank, a, 1}};
      EXPECT_THROW(comm->exchange(self, {}), InvalidArgument);
    });
  }
}

TEST(CommunicatorTest, TcpWorksOverIpv6) {
  try {
    net::listenOn("::1", 0);
  } catch (const Error&) {
    GTEST_SKIP() << "no IPv6 loopback on this machine";
  }
  auto store = createMemoryStore();
  runThreads(3, [&](int rank) {
    auto o = testOptions(Transport::kTcp, "ipv6");
    o.interface = "::1";
    auto comm = Communicator::create(store, rank, 3, o);
    std::vector<double> v(100000, rank + 1.0);
    comm->allreduce(v.data(), v.data(), v.size(), AllreduceOptions{DataType::kFloat64});
    EXPECT_EQ(v[99999], 6.0);
  });
}

TEST(CommunicatorTest, InvalidWorldIsRejected) {
  auto store = createMemoryStore();
  EXPECT_THROW(Communicator::create(store, 3, 2), InvalidArgument);
  EXPECT_THROW(Communicator::create(nullptr, 0, 1), InvalidArgument);
}

}  // namespace
}  // namespace gyre
