// Communicator::allocateShared: one mapping for every rank on one host over shared memory, and
// null on every rank when any pair talks over TCP; nothing left behind in /dev/shm.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>

#include "gyre/gyre.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using test::runThreads;

CommunicatorOptions options(Transport transport) {
  CommunicatorOptions o;
  o.transport = transport;
  o.secret = "test-secret";
  o.timeout = std::chrono::seconds(60);
  return o;
}

int sharedObjects() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    if (entry.path().filename().string().rfind("gyre-shared-", 0) == 0) ++n;
  return n;
}

TEST(SharedMemoryTest, EveryRankSeesWhatAnotherWrote) {
  const int before = sharedObjects();
  for (int size : {1, 3}) {
    auto store = createMemoryStore();
    runThreads(size, [&](int rank) {
      auto comm = Communicator::create(store, rank, size, options(Transport::kShm));
      auto shared = comm->allocateShared(4096);
      ASSERT_NE(shared, nullptr) << "rank " << rank;
      ASSERT_GE(shared->size(), 4096u);
      auto* words = static_cast<std::int32_t*>(shared->data());
      EXPECT_EQ(words[rank], 0) << "zero-filled";
      words[rank] = 100 + rank;  // each rank its own word
      comm->barrier();
      for (int r = 0; r < size; ++r) EXPECT_EQ(words[r], 100 + r) << "rank " << rank << " reading " << r;
    });
  }
  EXPECT_EQ(sharedObjects(), before) << "the names are unlinked once every rank has mapped them";
}

TEST(SharedMemoryTest, NullOnEveryRankWhenAPairTalksOverTcp) {
  auto store = createMemoryStore();
  runThreads(2, [&](int rank) {
    auto comm = Communicator::create(store, rank, 2, options(Transport::kTcp));
    EXPECT_EQ(comm->allocateShared(4096), nullptr) << "rank " << rank;
    comm->barrier();  // still usable
  });
}

}  // namespace
}  // namespace gyre
