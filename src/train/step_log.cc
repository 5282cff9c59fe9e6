#include "train/step_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "gyre/errors.h"

namespace gyre::train {

StepLog::StepLog(const std::string& path, bool append) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  if (fd_ < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
}

StepLog::~StepLog() {
  if (fd_ >= 0) ::close(fd_);
}

StepLog::StepLog(StepLog&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

StepLog& StepLog::operator=(StepLog&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

void StepLog::start(int generation, std::int64_t step) {
  append("{\"generation\":" + std::to_string(generation) + ",\"start_step\":" + std::to_string(step) + "}\n");
}

void StepLog::step(int generation, std::int64_t step, double time, const std::vector<double>& rankMs) {
  std::string line = "{\"generation\":" + std::to_string(generation) + ",\"step\":" + std::to_string(step);
  char number[32];
  std::snprintf(number, sizeof number, "%.3f", time);
  line += ",\"time\":";
  line += number;
  if (!rankMs.empty()) {
    line += ",\"rank_ms\":[";
    for (std::size_t i = 0; i < rankMs.size(); ++i) {
      std::snprintf(number, sizeof number, "%s%.3f", i == 0 ? "" : ",", rankMs[i]);
      line += number;
    }
    line += ']';
  }
  append(line + "}\n");
}

void StepLog::append(const std::string& line) {
  if (fd_ < 0) return;
  // One write: with O_APPEND a line is never interleaved or torn by a kill between two writes.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size()))
    throw Error("cannot write " + path_ + ": " +
                (n < 0 ? std::strerror(errno) : "short write (the disk is full?)"));
}

}  // namespace gyre::train
