// common/files.h: whole-file replacement through a temporary, and its errors.
#include "common/files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::files {
namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(Files, WriteAtomicallyReplacesTheWholeFile) {
  test::TempDir dir;
  const std::string path = dir.path() + "/a.json";
  writeAtomically(path, std::string(100000, 'x'));
  writeAtomically(path, "short");
  EXPECT_EQ(contents(path), "short");
  EXPECT_FALSE(std::filesystem::exists(temporaryPath(path)));
  EXPECT_NO_THROW(syncDirectory(dir.path()));
}

TEST(Files, CommitMovesAFinishedTemporaryIntoPlace) {
  test::TempDir dir;
  const std::string path = dir.path() + "/model.pt";
  const std::string temporary = temporaryPath(path);
  std::ofstream(temporary) << "weights";
  commit(temporary, path);
  EXPECT_EQ(contents(path), "weights");
  EXPECT_FALSE(std::filesystem::exists(temporary));
  try {
    commit(temporary, path);  // nothing there any more
    FAIL() << "committed a missing file";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path), std::string::npos) << e.what();
  }
  EXPECT_EQ(contents(path), "weights");  // the old file stays
}

TEST(Files, ErrorsNameThePathAndLeaveNothingBehind) {
  test::TempDir dir;
  const std::string path = dir.path() + "/no/such/dir/file";
  EXPECT_THROW(writeAtomically(path, "x"), SystemError);
  EXPECT_THROW(syncDirectory(dir.path() + "/missing"), SystemError);
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++left;
  EXPECT_EQ(left, 0u);
}

}  // namespace
}  // namespace gyre::files
