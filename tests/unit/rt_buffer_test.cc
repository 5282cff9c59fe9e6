// gyre::rt's objects in shared memory (putBuffer): read without a copy in the owner and mapped by
// the other processes of the host (here, runtimes of this process over loopback, which find the
// owner's file as another process would); a Buffer outlives its object's free and never changes,
// even when the owner reuses freed files; files of dead owners are removed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "gyre/rt.h"
#include "rt/shared_objects.h"
#include "support/rt_runtimes.h"

namespace gyre::rt {
namespace rt_buffer_test {

long sumOfBytes(ObjectRef<Buffer> ref) {
  const Buffer b = get(ref);
  long sum = 0;
  for (std::byte x : b.bytes()) sum += static_cast<long>(x);
  return sum;
}
GYRE_RT_FUNCTION(sumOfBytes);

std::vector<unsigned char> pattern(std::size_t n, unsigned char seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 7 + seed);
  return v;
}

bool same(const Buffer& b, const std::vector<unsigned char>& v) {
  return b.size() == v.size() && std::memcmp(b.data(), v.data(), v.size()) == 0;
}

// Files of /dev/shm whose names start with `prefix`.
int filesOf(const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    n += e.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

class RtBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
    store_ = createMemoryStore();
    runtimes_ = test::loopbackRuntimes(2, 2, store_);
  }
  Runtime& rt(int r) { return *runtimes_[static_cast<std::size_t>(r)]; }
  std::string prefixOf(int r) {  // "<host key>/<prefix>" in the store
    const std::string value = store_->getString("gyre-rt/shm/" + std::to_string(r));
    return value.substr(value.find('/') + 1);
  }
  std::shared_ptr<Store> store_;
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

TEST_F(RtBuffers, AreMappedWithoutACopyOnTheHostAndFreedWithTheirLastReference) {
  const std::vector<unsigned char> v = pattern(3 << 20, 1);
  auto ref = std::make_unique<ObjectRef<Buffer>>(rt(0).putBuffer(v.data(), v.size()));
  EXPECT_EQ(filesOf(prefixOf(0) + "-"), 1);
  // The owner reads its own mapping: two gets, one address.
  const Buffer a = rt(0).get(*ref), b = rt(0).get(*ref);
  EXPECT_TRUE(same(a, v));
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  // The other process maps the owner's file; so do tasks there.
  const Buffer there = rt(1).get(*ref);
  EXPECT_TRUE(same(there, v));
  EXPECT_NE(there.data(), a.data());
  const long expected = std::accumulate(v.begin(), v.end(), 0L);
  EXPECT_EQ(rt(0).task(sumOfBytes).options({.rank = 1}).remote(*ref).get(), expected);
  EXPECT_EQ(rt(1).task(sumOfBytes).options({.rank = 0}).remote(*ref).get(), expected);

  const auto borrowed = unpack<ObjectRef<Buffer>>(pack(*ref), "a reference");
  ref.reset();  // the owner's last reference: freed, though the Buffers above still read it
  const std::string freed = "gyre::rt: object 0.1 was freed: no ObjectRef to it remains in the process that put it";
  for (int r : {0, 1}) {
    try {
      (void)rt(r).get(borrowed);
      ADD_FAILURE() << "a get of a freed object from process " << r;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), freed);
    }
  }
  EXPECT_TRUE(same(a, v));
  EXPECT_TRUE(same(there, v));
}

TEST_F(RtBuffers, ABufferNeverChangesThoughItsFileIsReusedOnceNobodyMapsIt) {
  const std::vector<unsigned char> first = pattern(1 << 20, 1), second = pattern(1 << 20, 2),
                                   third = pattern(1 << 20, 3);
  auto ref = std::make_unique<ObjectRef<Buffer>>(rt(0).putBuffer(first.data(), first.size()));
  auto held = std::make_unique<Buffer>(rt(1).get(*ref));  // process 1 maps it
  ref.reset();                                            // freed: its file goes to the owner's pool
  const ObjectRef<Buffer> next = rt(0).putBuffer(second.data(), second.size());
  EXPECT_TRUE(same(*held, first));  // the pooled file was mapped: a new one was written
  EXPECT_TRUE(same(rt(1).get(next), second));
  held.reset();
  // Now nobody maps the first file: the next put of the size reuses it (no new file).
  const int files = filesOf(prefixOf(0) + "-");
  const ObjectRef<Buffer> last = rt(0).putBuffer(third.data(), third.size());
  EXPECT_EQ(filesOf(prefixOf(0) + "-"), files);
  EXPECT_TRUE(same(rt(1).get(last), third));
  EXPECT_TRUE(same(rt(0).get(next), second));
  // An empty buffer is an object too.
  EXPECT_EQ(rt(1).get(rt(0).putBuffer(nullptr, 0)).size(), 0u);
}

TEST_F(RtBuffers, ACopyOnWriteBufferIsWrittenWithoutChangingTheObject) {
  const std::vector<unsigned char> v = pattern(1 << 20, 4);
  const ObjectRef<Buffer> ref = rt(0).putBuffer(v.data(), v.size());
  EXPECT_EQ(rt(0).get(ref).writableData(), nullptr);  // a read-only view
  for (int r : {0, 1}) {
    const Buffer mine = rt(r).get(ref, Access::kCopyOnWrite);
    std::byte* const bytes = mine.writableData();
    ASSERT_TRUE(bytes != nullptr);
    EXPECT_TRUE(same(mine, v));
    if (bytes == nullptr) return;  // (for the compiler's null-dereference analysis)
    bytes[0] = std::byte{0xff};
    bytes[v.size() - 1] = std::byte{0xfe};
    EXPECT_EQ(mine.data()[0], std::byte{0xff});
    EXPECT_TRUE(same(rt(0).get(ref), v)) << "process " << r << "'s write reached the object";
    EXPECT_TRUE(same(rt(1).get(ref), v));
    EXPECT_TRUE(same(rt(1 - r).get(ref, Access::kCopyOnWrite), v));
  }
}

// Another host's object: the first reader of this host fetches it into a file that the readers
// after it map, while one still does; the last one removes it.
TEST(RtHostCopies, AreFetchedOncePerHostAndRemovedWithTheirLastReader) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  const std::string owner = "gyre-rt-" + std::to_string(::getpid()) + "-999";
  const std::string copies =
      "gyre-rt-c-" + detail::SharedObjects::hostKey() + "-ownerhost-" + std::to_string(::getpid()) + "-999-";
  const std::vector<unsigned char> v = pattern(1 << 20, 5);
  std::atomic<int> fetches{0};
  auto fetch = [&] {
    ++fetches;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others arrive meanwhile
    return std::string(reinterpret_cast<const char*>(v.data()), v.size());
  };
  {
    std::vector<Buffer> readers(4);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < readers.size(); ++i)
      threads.emplace_back([&, i] { readers[i] = detail::SharedObjects::fetchOnce("ownerhost", owner, 42, Access::kReadOnly, fetch); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(fetches.load(), 1);
    for (const Buffer& b : readers) EXPECT_TRUE(same(b, v));
    EXPECT_EQ(filesOf(copies), 1);
    // Copy on write: a reader's write stays its own.
    const Buffer mine = detail::SharedObjects::fetchOnce("ownerhost", owner, 42, Access::kCopyOnWrite, fetch);
    std::byte* const bytes = mine.writableData();
    ASSERT_TRUE(bytes != nullptr);
    if (bytes == nullptr) return;  // (for the compiler's null-dereference analysis)
    bytes[0] = std::byte{0xff};
    EXPECT_TRUE(same(readers[0], v));
    EXPECT_EQ(fetches.load(), 1);
  }
  EXPECT_EQ(filesOf(copies), 0);  // the last reader removed it (and no lock file is left)
  EXPECT_TRUE(same(detail::SharedObjects::fetchOnce("ownerhost", owner, 42, Access::kReadOnly, fetch), v));
  EXPECT_EQ(fetches.load(), 2);
  // A fetch that fails (freed, or its owner lost) leaves nothing behind.
  EXPECT_THROW(detail::SharedObjects::fetchOnce("ownerhost", owner, 43, Access::kReadOnly,
                                                []() -> std::string { throw InvalidArgument("freed"); }),
               InvalidArgument);
  EXPECT_EQ(filesOf(copies), 0);
}

TEST_F(RtBuffers, FilesOfADeadOwnerAreRemovedByTheNextRuntime) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid that no process has now
  const std::string orphan = "/dev/shm/gyre-rt-" + std::to_string(child) + "-0-00000000000000001";
  std::ofstream(orphan) << "left by a killed owner";
  ASSERT_TRUE(std::filesystem::exists(orphan));
  { Runtime alone; }
  EXPECT_FALSE(std::filesystem::exists(orphan));
  // The runtimes' own files go with them.
  const std::string mine = prefixOf(0) + "-";
  {
    const auto keep = rt(0).putBuffer("x", 1);
    EXPECT_EQ(filesOf(mine), 1) << mine;
    runtimes_.clear();
    EXPECT_EQ(filesOf(mine), 1);  // `keep` still references its object
  }
  EXPECT_EQ(filesOf(mine), 0);
}

}  // namespace rt_buffer_test
}  // namespace gyre::rt
