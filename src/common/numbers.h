// The one check of a number a user gives, as a flag or a GYRE_* knob: finite, inside the range
// its declaration states, and converted to a duration or an integer without overflow. Every
// failure is an InvalidArgument naming the flag, the accepted range and the value given, so the
// program exits with 2 before anything starts (docs/configuration.md, "What is checked").
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace gyre::numbers {

// No upper bound: below INT64_MAX, so still exact as the bound of an integer.
inline constexpr double kNoMax = 9.2e18;

struct Range {
  double min = -kNoMax;  // -kNoMax: no lower bound
  double max = kNoMax;
  bool minExclusive = false;  // (min, max] rather than [min, max]
  std::string_view unit = {};  // "s", "MiB": shown after the range
  std::string_view note = {};  // shown last, e.g. "0: never"
};

// The longest time-out or interval in seconds: its milliseconds fit a 32-bit int, which the
// launcher and the GYRE_*_MS knobs carry (24.8 days).
inline constexpr double kMaxSeconds = 2147483.0;
// The shortest: one millisecond, the resolution every time-out is carried in.
inline constexpr double kMinSeconds = 0.001;

// "[0, 2147483] s" / "(0, 1e+09]" / "at least 1".
std::string describe(const Range& r);

// Throws InvalidArgument "<name> must be a finite number in [0, 2147483] s (0: never); got inf"
// unless `value` is finite and inside `r`.
void check(std::string_view name, double value, const Range& r);
// The same for integers (no finiteness to check; the range is exact).
void checkInt(std::string_view name, std::int64_t value, std::int64_t min, std::int64_t max,
              std::string_view note = {});

// Seconds, already checked against a range inside [0, kMaxSeconds], as milliseconds (rounded to
// the nearest; a positive value below one millisecond is one millisecond).
std::chrono::milliseconds millis(double seconds);

// The shortest text that reads back as `value` ("0.05", "1e+300", "inf").
std::string format(double value);

}  // namespace gyre::numbers
