// The data-movement algorithms (broadcast, allgatherv, gather, scatter, alltoallv, barrier) on
// the fake mesh: world sizes 1-8, every root, empty, odd and large blocks, in place and out of
// place. Each rank's bytes carry its rank, so a block that lands in the wrong place shows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "support/fake_mesh.h"

namespace gyre::collectives {
namespace {

using test::FakeJob;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint8_t kUnwrittenByte = 0xEE;  // pattern() never produces it

std::size_t largeBytes() {
  const char* quick = std::getenv("GYRE_TEST_QUICK");
  return quick != nullptr && std::string(quick) == "1" ? 65537 : (std::size_t{4} << 20) + 3;
}

// `n` bytes that depend on `seed` (a rank, or a pair of ranks) and on the position.
Bytes pattern(std::size_t n, int seed) {
  Bytes v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 7 + static_cast<std::size_t>(seed) * 29 + i / 251) % 233);
  return v;
}

bool expectBlock(const std::string& what, const std::uint8_t* got, const Bytes& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << ": byte " << i << " is " << int(got[i]) << ", want " << int(want[i]);
      return false;
    }
  }
  return true;
}

bool expectQuiet(FakeJob& job, const std::string& what) {
  if (::testing::Test::HasFailure()) return false;
  if (job.network().pendingBytes() == 0) return true;
  ADD_FAILURE() << what << ": " << job.network().pendingBytes() << " bytes left unread";
  return false;
}

std::vector<int> roots(int p) {
  std::vector<int> r{0};
  if (p / 2 != 0) r.push_back(p / 2);
  if (p - 1 > p / 2) r.push_back(p - 1);
  return r;
}

std::vector<std::size_t> sizes() {
  return {0, 1, 7, 1023, largeBytes()};
}

class BroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastTest, EveryRankGetsTheRootsBytes) {
  const int p = GetParam();
  FakeJob job(p);
  using BroadcastFn = void (*)(Context&, void*, std::size_t, int);
  const std::pair<const char*, BroadcastFn> algorithms[] = {{"chain", broadcastChain},
                                                            {"tree", broadcastTree}};
  for (const auto& [name, algorithm] : algorithms)
    for (int root : roots(p))
      for (std::size_t n : sizes()) {
        const std::string what = std::string(name) + " p=" + std::to_string(p) +
                                 " root=" + std::to_string(root) + " bytes=" + std::to_string(n);
        std::vector<Bytes> buf(static_cast<std::size_t>(p));
        const BroadcastFn fn = algorithm;  // clang before 16 cannot capture a structured binding
        job.run([&](Context& c, int r) {
          auto& b = buf[static_cast<std::size_t>(r)];
          b = r == root ? pattern(n, root) : Bytes(n, kUnwrittenByte);
          fn(c, b.data(), n, root);
        });
        const Bytes want = pattern(n, root);
        for (int r = 0; r < p; ++r)
          if (!expectBlock(what + " rank " + std::to_string(r), buf[static_cast<std::size_t>(r)].data(),
                           want))
            return;
        if (!expectQuiet(job, what)) return;
      }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BroadcastTest, ::testing::Range(1, 9));

// Runs allgatherv with the given block sizes and offsets (out has `total` bytes; bytes between
// blocks must stay untouched).
bool checkAllgatherv(FakeJob& job, const std::vector<std::size_t>& bytes,
                     const std::vector<std::size_t>& offsets, std::size_t total, bool inPlace,
                     const std::string& what) {
  const int p = job.size();
  std::vector<Bytes> out(static_cast<std::size_t>(p));
  job.run([&](Context& c, int r) {
    const auto i = static_cast<std::size_t>(r);
    out[i].assign(total, kUnwrittenByte);
    const Bytes mine = pattern(bytes[i], r);
    if (inPlace) {
      std::copy(mine.begin(), mine.end(), out[i].begin() + static_cast<std::ptrdiff_t>(offsets[i]));
      return allgathervRing(c, out[i].data() + offsets[i], out[i].data(), bytes, offsets);
    }
    allgathervRing(c, mine.data(), out[i].data(), bytes, offsets);
  });
  for (int r = 0; r < p; ++r) {
    Bytes want(total, kUnwrittenByte);
    for (int b = 0; b < p; ++b) {
      const Bytes block = pattern(bytes[static_cast<std::size_t>(b)], b);
      std::copy(block.begin(), block.end(),
                want.begin() + static_cast<std::ptrdiff_t>(offsets[static_cast<std::size_t>(b)]));
    }
    if (!expectBlock(what + " rank " + std::to_string(r), out[static_cast<std::size_t>(r)].data(), want))
      return false;
  }
  return expectQuiet(job, what);
}

class AllgathervTest : public ::testing::TestWithParam<int> {};

TEST_P(AllgathervTest, EqualBlocksInPlaceAndOut) {
  const int p = GetParam();
  FakeJob job(p);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1023}, largeBytes() / 4})
    for (bool inPlace : {false, true}) {
      std::vector<std::size_t> bytes(static_cast<std::size_t>(p), n), offsets;
      for (int r = 0; r < p; ++r) offsets.push_back(static_cast<std::size_t>(r) * n);
      const std::string what = "allgather p=" + std::to_string(p) + " bytes=" + std::to_string(n);
      if (!checkAllgatherv(job, bytes, offsets, n * static_cast<std::size_t>(p), inPlace, what)) return;
    }
}

TEST_P(AllgathervTest, VariableAndEmptyBlocksAnywhere) {
  const int p = GetParam();
  FakeJob job(p);
  for (std::size_t base : {std::size_t{1}, std::size_t{1000}, std::size_t{70000}}) {
    // Every third rank contributes nothing; blocks are laid out in reverse rank order with gaps.
    std::vector<std::size_t> bytes, offsets(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) bytes.push_back(r % 3 == 1 ? 0 : base + static_cast<std::size_t>(r) * 3);
    std::size_t at = 5;
    for (int r = p - 1; r >= 0; --r) {
      offsets[static_cast<std::size_t>(r)] = at;
      at += bytes[static_cast<std::size_t>(r)] + 3;
    }
    for (bool inPlace : {false, true}) {
      const std::string what = "allgatherv p=" + std::to_string(p) + " base=" + std::to_string(base);
      if (!checkAllgatherv(job, bytes, offsets, at, inPlace, what)) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AllgathervTest, ::testing::Range(1, 9));

class GatherScatterTest : public ::testing::TestWithParam<int> {};

TEST_P(GatherScatterTest, RootCollectsAndDealsBlocks) {
  const int p = GetParam();
  const auto size = static_cast<std::size_t>(p);
  FakeJob job(p);
  for (int root : roots(p))
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1023}, largeBytes() / 8})
      for (bool inPlace : {false, true}) {
        const std::string what = "p=" + std::to_string(p) + " root=" + std::to_string(root) +
                                 " bytes=" + std::to_string(n) + (inPlace ? " in place" : "");
        const auto rootAt = static_cast<std::size_t>(root) * n;
        Bytes all(n * size, kUnwrittenByte);
        job.run([&](Context& c, int r) {
          const Bytes mine = pattern(n, r);
          if (r != root) return gatherLinear(c, mine.data(), nullptr, n, root);
          if (inPlace) std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(rootAt));
          gatherLinear(c, inPlace ? all.data() + rootAt : mine.data(), all.data(), n, root);
        });
        for (int r = 0; r < p; ++r)
          if (!expectBlock("gather " + what, all.data() + static_cast<std::size_t>(r) * n, pattern(n, r)))
            return;
        if (!expectQuiet(job, "gather " + what)) return;

        std::vector<Bytes> got(size);
        job.run([&](Context& c, int r) {
          auto& mine = got[static_cast<std::size_t>(r)];
          if (r != root) {
            mine.assign(n, kUnwrittenByte);
            return scatterLinear(c, nullptr, mine.data(), n, root);
          }
          mine = all;  // the root's input: block r for rank r
          Bytes own(n, kUnwrittenByte);
          scatterLinear(c, mine.data(), inPlace ? mine.data() + rootAt : own.data(), n, root);
          if (!inPlace) std::copy(own.begin(), own.end(), mine.begin() + static_cast<std::ptrdiff_t>(rootAt));
        });
        for (int r = 0; r < p; ++r) {
          const auto& g = got[static_cast<std::size_t>(r)];
          if (!expectBlock("scatter " + what + " rank " + std::to_string(r),
                           g.data() + (r == root ? rootAt : 0), pattern(n, r)))
            return;
        }
        if (!expectQuiet(job, "scatter " + what)) return;
      }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GatherScatterTest, ::testing::Range(1, 9));

class AlltoallvTest : public ::testing::TestWithParam<int> {};

TEST_P(AlltoallvTest, EveryBlockReachesItsRank) {
  const int p = GetParam();
  const auto size = static_cast<std::size_t>(p);
  FakeJob job(p);
  // bytes(s, d): what rank s sends rank d; some pairs send nothing.
  for (std::size_t base : {std::size_t{0}, std::size_t{3}, std::size_t{1023}, std::size_t{50000}}) {
    auto bytes = [&](int s, int d) -> std::size_t {
      if (base == 0) return 0;
      return (s * 5 + d * 3) % 4 == 0 ? 0 : base + static_cast<std::size_t>(s + 2 * d);
    };
    std::vector<Bytes> out(size);
    job.run([&](Context& c, int r) {
      std::vector<std::size_t> sendBytes, sendOffsets, recvBytes, recvOffsets;
      Bytes in;
      for (int d = 0; d < p; ++d) {
        const Bytes block = pattern(bytes(r, d), r * 8 + d);
        sendOffsets.push_back(in.size());
        sendBytes.push_back(block.size());
        in.insert(in.end(), block.begin(), block.end());
      }
      std::size_t total = 0;
      for (int s = 0; s < p; ++s) {
        recvOffsets.push_back(total);
        recvBytes.push_back(bytes(s, r));
        total += bytes(s, r);
      }
      auto& o = out[static_cast<std::size_t>(r)];
      o.assign(total, kUnwrittenByte);
      alltoallvPairwise(c, in.data(), sendBytes, sendOffsets, o.data(), recvBytes, recvOffsets);
    });
    for (int r = 0; r < p; ++r) {
      std::size_t at = 0;
      for (int s = 0; s < p; ++s) {
        const std::string what = "alltoallv p=" + std::to_string(p) + " base=" + std::to_string(base) +
                                 " block " + std::to_string(s) + "->" + std::to_string(r);
        if (!expectBlock(what, out[static_cast<std::size_t>(r)].data() + at, pattern(bytes(s, r), s * 8 + r)))
          return;
        at += bytes(s, r);
      }
    }
    if (!expectQuiet(job, "alltoallv base=" + std::to_string(base))) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AlltoallvTest, ::testing::Range(1, 9));

class BarrierTest : public ::testing::TestWithParam<int> {};

TEST_P(BarrierTest, NoRankLeavesBeforeEveryRankArrives) {
  const int p = GetParam();
  FakeJob job(p);
  constexpr int kRounds = 12;
  std::atomic<int> arrived{0};
  job.run([&](Context& c, int r) {
    for (int round = 0; round < kRounds; ++round) {
      // A different rank is late each round.
      if (r == round % p) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      arrived.fetch_add(1);
      barrierDissemination(c);
      EXPECT_GE(arrived.load(), (round + 1) * p) << "rank " << r << " left round " << round << " early";
    }
  });
  EXPECT_EQ(arrived.load(), kRounds * p);
  expectQuiet(job, "barrier");
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BarrierTest, ::testing::Range(1, 9));

}  // namespace
}  // namespace gyre::collectives
