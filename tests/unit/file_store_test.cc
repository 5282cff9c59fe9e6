// File-store specifics beyond the contract: permissions, torn records, foreign files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "gyre/errors.h"
#include "gyre/store.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using std::chrono::milliseconds;

TEST(FileStore, CreatesItsFileWithMode0600) {
  test::TempDir dir;
  const std::string path = dir.path() + "/s";
  auto store = createFileStore(path);
  store->setString("k", "v");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(FileStore, IgnoresAndRepairsARecordTornByACrashedWriter) {
  test::TempDir dir;
  const std::string path = dir.path() + "/s";
  createFileStore(path)->setString("before", "crash");
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    const char torn[] = {1, 3, 0, 0, 0, 'a', 'b'};  // a set whose key stops short
    out.write(torn, sizeof(torn));
  }
  auto store = createFileStore(path);
  EXPECT_EQ(store->getString("before", milliseconds(100)), "crash");
  EXPECT_FALSE(store->check({"ab"}));
  store->setString("after", "repair");
  auto fresh = createFileStore(path);
  EXPECT_EQ(fresh->getString("before", milliseconds(100)), "crash");
  EXPECT_EQ(fresh->getString("after", milliseconds(100)), "repair");
}

TEST(FileStore, RefusesAFileThatIsNotAStore) {
  test::TempDir dir;
  const std::string path = dir.path() + "/notes.txt";
  std::ofstream(path) << "just some text, not a store";
  EXPECT_THROW(createFileStore(path), ProtocolError);
  EXPECT_THROW(createFileStore(dir.path() + "/missing-dir/s"), SystemError);
}

TEST(FileStore, InstancesSeeEachOthersChangesAndAReplacedFile) {
  test::TempDir dir;
  const std::string path = dir.path() + "/s";
  auto a = createFileStore(path);
  auto b = createFileStore(path);
  a->setString("x", "1");
  EXPECT_EQ(b->getString("x", milliseconds(100)), "1");
  EXPECT_TRUE(b->deleteKey("x"));
  EXPECT_FALSE(a->check({"x"}));
  std::remove(path.c_str());
  b->setString("y", "new file");
  EXPECT_FALSE(a->check({"x"}));
  EXPECT_EQ(a->getString("y", milliseconds(100)), "new file");
}

}  // namespace
}  // namespace gyre
