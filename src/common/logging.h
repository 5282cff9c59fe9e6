// Minimal leveled logging to stderr. The level comes from GYRE_LOG_LEVEL (error, warn, info,
// debug, any case; read through the knob table, common/config.h); the default is warn. Thread-safe: each message is written with one write(2).
#pragma once

#include <sstream>
#include <string>

namespace gyre::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level level();
void setLevel(Level level);
void write(Level level, const std::string& message);

template <typename... Args>
void message(Level lvl, const Args&... args) {
  if (static_cast<int>(lvl) > static_cast<int>(level())) return;
  std::ostringstream out;
  (out << ... << args);
  write(lvl, out.str());
}

template <typename... Args> void error(const Args&... a) { message(Level::kError, a...); }
template <typename... Args> void warn(const Args&... a) { message(Level::kWarn, a...); }
template <typename... Args> void info(const Args&... a) { message(Level::kInfo, a...); }
template <typename... Args> void debug(const Args&... a) { message(Level::kDebug, a...); }

}  // namespace gyre::log
