// The fake mesh the algorithm tests run on must itself keep the mesh contract: bounded FIFOs
// (so deadlocks show), per-peer order, byte-granular `after`, ordered receive-reduce, abort.
#include "support/fake_mesh.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "gyre/errors.h"

namespace gyre::test {
namespace {

using transport::Op;

std::vector<std::uint8_t> pattern(std::size_t n, int seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 31 + static_cast<std::size_t>(seed) * 7) % 251 + 1);
  return v;
}

TEST(FakeMesh, MovesMoreThanItsCapacityWhenBothSidesRunAtOnce) {
  FakeJob job(2, 1024);
  constexpr std::size_t kBytes = 100 * 1024 + 3;
  const auto a = pattern(kBytes, 0), b = pattern(kBytes, 1);
  std::vector<std::uint8_t> got0(kBytes), got1(kBytes);
  job.run([&](collectives::Context& c, int r) {
    std::vector<Op> ops{Op::send(1 - r, r == 0 ? a.data() : b.data(), kBytes),
                        Op::recv(1 - r, r == 0 ? got0.data() : got1.data(), kBytes)};
    c.run(ops);
    EXPECT_EQ(ops[0].done, kBytes);
    EXPECT_EQ(ops[1].done, kBytes);
  });
  EXPECT_EQ(got0, b);
  EXPECT_EQ(got1, a);
  EXPECT_EQ(job.network().pendingBytes(), 0u);
}

TEST(FakeMesh, SendsThatNeedUnboundedBufferingTimeOut) {
  FakeJob job(2, 4096);
  const auto data = pattern(64 * 1024, 0);
  std::vector<std::uint8_t> got(64 * 1024);
  job.run([&](collectives::Context& c, int r) {
    // Each rank sends everything before it receives anything: fine with unbounded buffers,
    // a deadlock on a real transport.
    EXPECT_THROW(
        c.mesh.send(1 - r, data.data(), data.size(), Deadline::after(std::chrono::milliseconds(200))),
        TimeoutError);
    // The mesh stays broken.
    EXPECT_THROW(c.mesh.recv(1 - r, got.data(), got.size(), Deadline::after(std::chrono::milliseconds(10))),
                 TimeoutError);
  });
}

TEST(FakeMesh, TimeoutNamesThePeerItWaitsOn) {
  FakeJob job(3);
  job.run([&](collectives::Context& c, int r) {
    if (r != 0) return;
    std::uint8_t byte = 0;
    try {
      c.mesh.recv(2, &byte, 1, Deadline::after(std::chrono::milliseconds(50)));
      ADD_FAILURE() << "a receive nobody sends to returned";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("receive from 2"), std::string::npos) << e.what();
    }
  });
}

TEST(FakeMesh, AfterForwardsOnlyBytesThatHaveArrived) {
  // 0 -> 1 -> 2 through 1 KiB FIFOs: rank 1 forwards each byte after it arrives (a pipelined
  // chain). Were `after` ignored, rank 2 would get rank 1's zeros.
  FakeJob job(3, 1024);
  constexpr std::size_t kBytes = 50 * 1000;
  const auto data = pattern(kBytes, 3);
  std::vector<std::uint8_t> relay(kBytes, 0), got(kBytes, 0);
  job.run([&](collectives::Context& c, int r) {
    std::vector<Op> ops;
    if (r == 0) ops.push_back(Op::send(1, data.data(), kBytes));
    if (r == 1) ops = {Op::recv(0, relay.data(), kBytes), Op::send(2, relay.data(), kBytes, 0)};
    if (r == 2) ops.push_back(Op::recv(1, got.data(), kBytes));
    c.run(ops);
  });
  EXPECT_EQ(got, data);
}

TEST(FakeMesh, SamePeerSameDirectionRunsInListOrder) {
  FakeJob job(2, 64);
  const auto first = pattern(1000, 4), second = pattern(500, 5);
  std::vector<std::uint8_t> a(1000), b(500);
  job.run([&](collectives::Context& c, int r) {
    std::vector<Op> ops;
    if (r == 0) ops = {Op::send(1, first.data(), 1000), Op::send(1, second.data(), 500)};
    // The receives are posted together; the first must take the first 1000 bytes.
    if (r == 1) ops = {Op::recv(0, a.data(), 1000), Op::recv(0, b.data(), 500)};
    c.run(ops);
  });
  EXPECT_EQ(a, first);
  EXPECT_EQ(b, second);
}

TEST(FakeMesh, EverySendIsOneMessageForOneReceiveOfItsSize) {
  FakeJob job(2, 64);
  const auto data = pattern(100, 6);
  std::vector<std::uint8_t> got(100);
  job.run([&](collectives::Context& c, int r) {
    if (r == 0) {
      // Blocks once the FIFO is full; rank 1 aborts after its mismatch.
      EXPECT_THROW(c.mesh.send(1, data.data(), 100, c.deadline), PeerLostError);
      return;
    }
    std::vector<Op> ops{Op::recv(0, got.data(), 50), Op::recv(0, got.data() + 50, 50)};
    try {
      c.run(ops);
      ADD_FAILURE() << "a 100-byte message was taken by a 50-byte receive";
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find("one of 100 bytes"), std::string::npos) << e.what();
      c.mesh.abort(1, e.what());
    }
  });
}

TEST(FakeMesh, ChainedReceiveReducesInTheListedOrder) {
  // (in op x1) op x2 with a non-commutative view: sum of floats whose order changes the result.
  FakeJob job(3, 16);
  constexpr std::size_t kCount = 1000;
  std::vector<float> in(kCount, 1.0f), one(kCount, 1e8f), two(kCount, -1e8f), out(kCount, 0);
  job.run([&](collectives::Context& c, int r) {
    std::vector<Op> ops;
    if (r == 0) {
      ops.push_back(Op::recvReduce(1, out.data(), kCount * 4, DataType::kFloat32, ReduceOp::kSum, in.data()));
      ops.push_back(
          Op::recvReduce(2, out.data(), kCount * 4, DataType::kFloat32, ReduceOp::kSum, nullptr, 0));
    }
    if (r == 1) ops.push_back(Op::send(0, one.data(), kCount * 4));
    if (r == 2) ops.push_back(Op::send(0, two.data(), kCount * 4));
    c.run(ops);
  });
  for (float v : out) ASSERT_EQ(v, (1.0f + 1e8f) + -1e8f);  // 0, where 1 + (1e8 - 1e8) would be 1
  EXPECT_EQ(in, std::vector<float>(kCount, 1.0f));
}

TEST(FakeMesh, AbortFailsEveryRankWithPeerLost) {
  FakeJob job(3);
  job.run([&](collectives::Context& c, int r) {
    if (r == 1) {
      c.mesh.abort(1, "injected failure");
      return;
    }
    std::uint8_t byte = 0;
    try {
      c.mesh.recv(1, &byte, 1, Deadline::after(std::chrono::seconds(20)));
      ADD_FAILURE() << "rank " << r << " received from an aborted rank";
    } catch (const PeerLostError& e) {
      EXPECT_EQ(e.rank(), 1);
      EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos);
    }
    EXPECT_THROW(c.mesh.send((r + 1) % 3, &byte, 1, Deadline::after(std::chrono::seconds(1))), PeerLostError);
  });
}

TEST(FakeMesh, RejectsMalformedOpLists) {
  FakeJob job(2);
  job.run([&](collectives::Context& c, int r) {
    if (r != 0) return;
    std::uint8_t buf[16] = {};
    std::vector<Op> self{Op::send(0, buf, 1)};
    EXPECT_THROW(c.run(self), InvalidArgument);
    std::vector<Op> forward{Op::send(1, buf, 4, 1), Op::recv(1, buf, 4)};
    EXPECT_THROW(c.run(forward), InvalidArgument);
    std::vector<Op> longer{Op::recv(1, buf, 4), Op::send(1, buf, 8, 0)};
    EXPECT_THROW(c.run(longer), InvalidArgument);
    std::vector<Op> partial{Op::recvReduce(1, buf, 6, DataType::kFloat32, ReduceOp::kSum)};
    EXPECT_THROW(c.run(partial), InvalidArgument);
    std::vector<Op> empty{Op::send(1, nullptr, 0)};
    EXPECT_NO_THROW(c.run(empty));
  });
  EXPECT_EQ(job.network().pendingBytes(), 0u);
}

}  // namespace
}  // namespace gyre::test
