#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <exception>

#include "common/config.h"

namespace gyre::log {
namespace {

// GYRE_LOG_LEVEL through the knob table (any case). gyre::init() and the gyre tool refuse a bad
// value before anything logs; a program that logs without them hears about it here, once, and
// gets the default.
Level levelFromEnv() {
  std::string value;
  try {
    value = config::getChoice(config::processEnvironment(), "GYRE_LOG_LEVEL");
  } catch (const std::exception& e) {
    const std::string line = std::string("[gyre error] ") + e.what() + "; logging at warn\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    return Level::kWarn;
  }
  if (value == "error") return Level::kError;
  if (value == "info") return Level::kInfo;
  if (value == "debug") return Level::kDebug;
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
