#include "bench_lists.h"

#include <algorithm>
#include <charconv>

#include "common/check.h"
#include "common/strings.h"

namespace gyre::app {

std::vector<std::string> splitCommas(const std::string& text) {
  return split(text, ',');
}

std::optional<int> parseCount(const std::string& text, int max) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 1 || value > max) return std::nullopt;
  return value;
}

std::vector<int> parseCountList(const std::string& text, const std::string& flag, const std::string& what,
                                int max, const std::string& example) {
  std::vector<int> counts;
  for (const std::string& part : splitCommas(text)) {
    const std::optional<int> n = parseCount(part, max);
    GYRE_USAGE_CHECK(n.has_value(), flag, " '", text, "': expected ", what, " between 1 and ", max,
                     " separated by commas, like ", example);
    GYRE_USAGE_CHECK(std::find(counts.begin(), counts.end(), *n) == counts.end(), flag, " '", text, "': ", *n,
                     " is given twice");
    counts.push_back(*n);
  }
  return counts;
}

}  // namespace gyre::app
