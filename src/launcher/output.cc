#include "launcher/output.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/check.h"

namespace gyre::launcher {

void say(const std::string& line) {
  std::fprintf(stderr, "gyre run: %s\n", line.c_str());
}

OutputSink::OutputSink(int worldSize, bool tag, const std::string& outputDir, std::size_t tailLines)
    : tag_(tag), dir_(outputDir), tailLines_(tailLines), tails_(worldSize), partial_(worldSize) {
  // Workers' lines appear as they come, also when the launcher's output is a file or a pipe.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) GYRE_THROW(SystemError, "--output-dir: cannot create ", dir_, ": ", ec.message());
  for (int r = 0; r < worldSize; ++r) {
    std::FILE* f = openLog(r);
    if (f == nullptr) {
      const std::string why = std::strerror(errno);
      for (std::FILE* open : logs_) std::fclose(open);
      GYRE_THROW(SystemError, "--output-dir: cannot write ", logPath(r), ": ", why);
    }
    logs_.push_back(f);
  }
}

OutputSink::~OutputSink() {
  for (std::FILE* f : logs_)
    if (f != nullptr) std::fclose(f);
  for (std::FILE* f : serverLogs_)
    if (f != nullptr) std::fclose(f);
}

std::FILE* OutputSink::openLog(int rank) {
  return std::fopen(logPath(rank).c_str(), "w");
}

void OutputSink::grow(int rank) {
  const auto size = static_cast<std::size_t>(rank) + 1;
  if (size <= tails_.size()) return;
  tails_.resize(size);
  partial_.resize(size);
  if (dir_.empty()) return;
  for (int r = static_cast<int>(logs_.size()); r <= rank; ++r) {
    std::FILE* f = openLog(r);
    if (f == nullptr)
      std::fprintf(stderr, "gyre run: warning: --output-dir: cannot write %s: %s\n", logPath(r).c_str(),
                   std::strerror(errno));
    logs_.push_back(f);
  }
}

std::string OutputSink::logPath(int rank) const {
  return dir_.empty() ? ""
                      : (std::filesystem::path(dir_) / ("rank." + std::to_string(rank) + ".log")).string();
}

void OutputSink::line(int rank, bool fromStderr, const std::string& text, char terminator) {
  if (rank < 0) return;
  grow(rank);
  std::FILE* stream = fromStderr ? stderr : stdout;
  const char* end = terminator == '\n' ? "\n" : terminator == '\r' ? "\r" : "";
  auto write = [&](std::FILE* f) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fputs(end, f);
  };
  if (tag_) std::fprintf(stream, "[%d]<%s>:", rank, fromStderr ? "stderr" : "stdout");
  write(stream);
  // Every line as it comes, as on a terminal: piped into tee or a log, an epoch line must not wait
  // for the job's end in stdio's buffer (a progress bar, ending in '\r', redraws in place).
  std::fflush(stream);
  if (!logs_.empty() && logs_[rank] != nullptr) write(logs_[rank]);

  partial_[rank] += text;
  if (terminator == '\0') return;
  auto& tail = tails_[rank];
  tail.push_back(std::move(partial_[rank]));
  partial_[rank].clear();
  if (tail.size() > tailLines_) tail.pop_front();
}

void OutputSink::serverLine(int index, bool fromStderr, const std::string& text, char terminator) {
  if (index < 0) return;
  std::FILE* stream = fromStderr ? stderr : stdout;
  const char* end = terminator == '\n' ? "\n" : terminator == '\r' ? "\r" : "";
  std::fprintf(stream, "[ps%d]<%s>:", index, fromStderr ? "stderr" : "stdout");
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fputs(end, stream);
  std::fflush(stream);
  if (std::FILE* log = serverLog(index)) {
    std::fwrite(text.data(), 1, text.size(), log);
    std::fputs(end, log);
  }
}

std::FILE* OutputSink::serverLog(int index) {
  if (dir_.empty()) return nullptr;
  const auto slot = static_cast<std::size_t>(index);
  if (slot < serverLogs_.size() && serverLogs_[slot] != nullptr) return serverLogs_[slot];
  if (slot >= serverLogs_.size()) serverLogs_.resize(slot + 1, nullptr);
  if (serverLogFailed_) return nullptr;
  const std::string path = (std::filesystem::path(dir_) / ("ps." + std::to_string(index) + ".log")).string();
  serverLogs_[slot] = std::fopen(path.c_str(), "w");
  if (serverLogs_[slot] == nullptr) {
    std::fprintf(stderr, "gyre run: warning: --output-dir: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    serverLogFailed_ = true;  // warned once; the servers' lines still reach the terminal
  }
  return serverLogs_[slot];
}

void OutputSink::startGeneration(int restart) {
  for (std::size_t r = 0; r < logs_.size(); ++r)
    if (logs_[r] != nullptr)
      std::fprintf(logs_[r], "%s--- gyre run: restart %d ---\n", partial_[r].empty() ? "" : "\n", restart);
  for (std::FILE* f : serverLogs_)
    if (f != nullptr) std::fprintf(f, "--- gyre run: restart %d ---\n", restart);
  for (auto& t : tails_) t.clear();
  for (auto& p : partial_) p.clear();
}

std::vector<std::string> OutputSink::tail(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(tails_.size())) return {};
  std::vector<std::string> lines(tails_.at(rank).begin(), tails_.at(rank).end());
  if (!partial_.at(rank).empty()) lines.push_back(partial_.at(rank));
  return lines;
}

void OutputSink::flush() {
  std::fflush(stdout);
  std::fflush(stderr);
  for (std::FILE* f : logs_)
    if (f != nullptr) std::fflush(f);
  for (std::FILE* f : serverLogs_)
    if (f != nullptr) std::fflush(f);
}

}  // namespace gyre::launcher
