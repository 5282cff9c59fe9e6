// Splits what arrives on a descriptor into lines, for relaying workers' output and reading the
// launcher/agent protocol.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "common/clock.h"

namespace gyre::launcher {

class LineReader {
 public:
  // onLine(text, terminator): terminator is '\n', '\r' (when splitOnReturn), or '\0' for a line
  // cut at maxLine bytes or a last line without a newline.
  using OnLine = std::function<void(const std::string& text, char terminator)>;

  explicit LineReader(bool splitOnReturn = false, std::size_t maxLine = 64 << 10)
      : splitOnReturn_(splitOnReturn), maxLine_(maxLine) {}

  // Reads what `fd` has now (it should be non-blocking, or poll()ed readable) and calls onLine
  // for every complete line. Returns false at end of file, after passing on any unterminated
  // rest; true otherwise (also on EAGAIN/EINTR).
  bool readFrom(int fd, const OnLine& onLine);
  // Passes on the unterminated rest, if any.
  void flush(const OnLine& onLine);

 private:
  void split(const OnLine& onLine);

  bool splitOnReturn_;
  std::size_t maxLine_;
  std::string buffer_;
};

// Writes all of `data` to a pipe or file descriptor (blocking or not), waiting for room until
// the deadline. Throws SystemError (EPIPE when the reader is gone) or TimeoutError.
void writeFully(int fd, const std::string& data, Deadline deadline);

}  // namespace gyre::launcher
