#include "common/numbers.h"

#include <charconv>
#include <cmath>

#include "common/check.h"

namespace gyre::numbers {

std::string format(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

std::string describe(const Range& r) {
  // Appends only: GCC 12 warns (-Wrestrict, falsely) on `"(" + std::string(...)` at -O3.
  std::string out;
  if (r.max >= kNoMax) {
    out += r.minExclusive ? "above " : "at least ";
    out += format(r.min);
  } else if (r.min <= -kNoMax) {
    out += "at most ";
    out += format(r.max);
  } else {
    out += r.minExclusive ? "(" : "[";
    out += format(r.min);
    out += ", ";
    out += format(r.max);
    out += "]";
  }
  if (!r.unit.empty()) {
    out += " ";
    out += r.unit;
  }
  if (!r.note.empty()) {
    out += " (";
    out += r.note;
    out += ")";
  }
  return out;
}

void check(std::string_view name, double value, const Range& r) {
  const bool aboveMin = r.minExclusive ? value > r.min : value >= r.min;
  GYRE_USAGE_CHECK(std::isfinite(value) && aboveMin && value <= r.max, name, " must be a finite number ",
                   r.max < kNoMax && r.min > -kNoMax ? "in " : r.minExclusive ? "" : "of ", describe(r),
                   "; got ", format(value));
}

void checkInt(std::string_view name, std::int64_t value, std::int64_t min, std::int64_t max,
              std::string_view note) {
  if (value >= min && value <= max) return;
  std::string range;
  if (static_cast<double>(max) >= kNoMax) {
    range += "of at least ";
    range += std::to_string(min);
  } else {
    range += "in [";
    range += std::to_string(min);
    range += ", ";
    range += std::to_string(max);
    range += "]";
  }
  if (!note.empty()) {
    range += " (";
    range += note;
    range += ")";
  }
  GYRE_USAGE_CHECK(false, name, " must be an integer ", range, "; got ", value);
}

std::chrono::milliseconds millis(double seconds) {
  GYRE_ARG_CHECK(std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxSeconds, "a duration of ",
                 format(seconds), " s is outside [0, ", format(kMaxSeconds), "] s");
  const auto ms = static_cast<std::int64_t>(std::llround(seconds * 1000));
  return std::chrono::milliseconds(seconds > 0 ? std::max<std::int64_t>(ms, 1) : 0);
}

}  // namespace gyre::numbers
