#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace gyre::log {
namespace {

Level levelFromEnv() {
  const char* v = std::getenv("GYRE_LOG_LEVEL");
  if (v == nullptr) return Level::kWarn;
  if (std::strcmp(v, "error") == 0) return Level::kError;
  if (std::strcmp(v, "info") == 0) return Level::kInfo;
  if (std::strcmp(v, "debug") == 0) return Level::kDebug;
  return Level::kWarn;
}

std::atomic<int>& currentLevel() {
  static std::atomic<int> value{static_cast<int>(levelFromEnv())};
  return value;
}

const char* name(Level level) {
  switch (level) {
    case Level::kError: return "error";
    case Level::kWarn: return "warn";
    case Level::kInfo: return "info";
    case Level::kDebug: return "debug";
  }
  return "?";
}

}  // namespace

Level level() { return static_cast<Level>(currentLevel().load(std::memory_order_relaxed)); }
void setLevel(Level lvl) { currentLevel().store(static_cast<int>(lvl)); }

void write(Level lvl, const std::string& message) {
  std::string line = std::string("[gyre ") + name(lvl) + "] " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace gyre::log
