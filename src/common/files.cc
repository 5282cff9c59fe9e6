#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gyre/errors.h"

namespace gyre::files {

void fail(const std::string& what, const std::string& path, int error) {
  std::string reason = std::strerror(error);
  if (error == ENOSPC || error == EDQUOT) reason += " (the disk is full)";
  if (error == EFBIG) reason += " (over the file size limit)";
  throw SystemError("cannot " + what + " " + path + ": " + reason);
}

namespace {

// fsync and close `fd`, then rename `temporary` to `path`; the first errno, or 0.
int syncCloseRename(int fd, const std::string& temporary, const std::string& path) {
  // Delayed allocation can report a full disk only here.
  int error = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  return error;
}

}  // namespace

std::string temporaryPath(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void writeAtomically(const std::string& path, std::string_view bytes) {
  const std::string temporary = temporaryPath(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("write", path, errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(temporary.c_str());
      fail("write", path, error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (const int error = syncCloseRename(fd, temporary, path); error != 0) {
    ::unlink(temporary.c_str());
    fail("write", path, error);
  }
}

void commit(const std::string& temporary, const std::string& path) {
  const int fd = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
  const int error = fd < 0 ? errno : syncCloseRename(fd, temporary, path);
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail("write", path + " (from " + temporary + ")", error);
  }
}

void syncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open the directory", dir, errno);
  // Some file systems cannot fsync a directory (EINVAL): their renames are durable anyway.
  const int error = ::fsync(fd) != 0 && errno != EINVAL ? errno : 0;
  ::close(fd);
  if (error != 0) fail("sync the directory", dir, error);
}

}  // namespace gyre::files
