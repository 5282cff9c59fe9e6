#include "train/run_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw Error("cannot " + what + " " + path + ": " + std::strerror(error) +
              (error == ENOSPC || error == EDQUOT ? " (the disk is full)" : ""));
}

}  // namespace

void createRunDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run directory " + dir + ": " + ec.message());
}

std::string temporaryPathFor(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  const std::string temporary = temporaryPathFor(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("write", path, errno);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(temporary.c_str());
      fail("write", path, error);
    }
    done += static_cast<std::size_t>(n);
  }
  // Delayed allocation can report a full disk only here.
  int error = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail("write", path, error);
  }
  commitFile(temporary, path);
}

void commitFile(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("write", path + " (renaming " + temporary + ")", error);
  }
}

}  // namespace gyre::train
