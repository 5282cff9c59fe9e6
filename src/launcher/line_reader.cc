#include "launcher/line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/check.h"

namespace gyre::launcher {

bool LineReader::readFrom(int fd, const OnLine& onLine) {
  char chunk[1 << 16];
  const ssize_t n = ::read(fd, chunk, sizeof chunk);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return true;
    if (errno == EIO) {  // a terminal that went away reads as EIO: treat as the end
      flush(onLine);
      return false;
    }
    GYRE_THROW(SystemError, "read failed: ", std::strerror(errno));
  }
  if (n == 0) {
    flush(onLine);
    return false;
  }
  buffer_.append(chunk, static_cast<std::size_t>(n));
  split(onLine);
  return true;
}

void LineReader::flush(const OnLine& onLine) {
  if (buffer_.empty()) return;
  std::string rest;
  rest.swap(buffer_);
  onLine(rest, '\0');
}

void LineReader::split(const OnLine& onLine) {
  const char* terminators = splitOnReturn_ ? "\n\r" : "\n";
  std::size_t start = 0;
  while (true) {
    const std::size_t end = buffer_.find_first_of(terminators, start);
    if (end == std::string::npos) {
      if (buffer_.size() - start < maxLine_) break;
      onLine(buffer_.substr(start, maxLine_), '\0');
      start += maxLine_;
      continue;
    }
    const std::size_t length = end - start;
    for (std::size_t cut = 0; cut + maxLine_ < length; cut += maxLine_)
      onLine(buffer_.substr(start + cut, maxLine_), '\0');
    const std::size_t tail = length - (length == 0 ? 0 : ((length - 1) / maxLine_) * maxLine_);
    onLine(buffer_.substr(end - tail, tail), buffer_[end]);
    start = end + 1;
  }
  buffer_.erase(0, start);
}

void writeFully(int fd, const std::string& data, Deadline deadline) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) GYRE_THROW(SystemError, "write failed: ", std::strerror(errno));
    if (deadline.expired()) GYRE_THROW(TimeoutError, "write timed out: the reader takes nothing");
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, std::min(100, std::max(1, deadline.remainingMs())));
  }
}

}  // namespace gyre::launcher
