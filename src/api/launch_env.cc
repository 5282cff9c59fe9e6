#include "api/launch_env.h"

#include <cctype>
#include <charconv>

#include "common/auth.h"
#include "common/check.h"

namespace gyre::launch {
namespace {

std::vector<std::string_view> splitTopLevel(std::string_view list) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') ++depth;
    if (list[i] == ']') --depth;
    if (list[i] == ',' && depth == 0) {
      items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  items.push_back(list.substr(start));
  return items;
}

bool parseUnsigned(std::string_view text, std::uint64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return std::from_chars(text.data(), text.data() + text.size(), *out).ec == std::errc();
}

std::string padded(std::uint64_t value, std::size_t width) {
  std::string s = std::to_string(value);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Expands one comma-free (at top level) host expression into out.
void expandItem(std::string_view item, std::string_view list, std::string_view variable, std::size_t maxHosts,
                const std::string& prefix, std::vector<std::string>& out) {
  const auto open = item.find('[');
  if (open == std::string_view::npos) {
    GYRE_ARG_CHECK(item.find(']') == std::string_view::npos, variable, "='", list, "': unbalanced ']'");
    GYRE_ARG_CHECK(out.size() < maxHosts, variable, "='", list, "' names more than ", maxHosts, " hosts");
    out.push_back(prefix + std::string(item));
    return;
  }
  const auto close = item.find(']', open);
  GYRE_ARG_CHECK(close != std::string_view::npos, variable, "='", list, "': unbalanced '['");
  const std::string head = prefix + std::string(item.substr(0, open));
  GYRE_ARG_CHECK(head.find(']') == std::string::npos, variable, "='", list, "': unbalanced ']'");
  const std::string_view group = item.substr(open + 1, close - open - 1);
  const std::string_view rest = item.substr(close + 1);
  std::size_t start = 0;
  for (;;) {
    const auto comma = group.find(',', start);
    const std::string_view range =
        group.substr(start, comma == std::string_view::npos ? comma : comma - start);
    const auto dash = range.find('-');
    const std::string_view lo = range.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : range.substr(dash + 1);
    std::uint64_t a = 0, b = 0;
    GYRE_ARG_CHECK(parseUnsigned(lo, &a) && parseUnsigned(hi, &b) && a <= b, variable, "='", list,
                   "': malformed range '", range, "' (expected N or N-M with N <= M)");
    GYRE_ARG_CHECK(b - a < maxHosts, variable, "='", list, "' names more than ", maxHosts, " hosts");
    for (std::uint64_t v = a; v <= b; ++v)
      expandItem(rest, list, variable, maxHosts, head + padded(v, lo.size()), out);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expandNodelist(std::string_view list, std::string_view variable,
                                        std::size_t maxHosts) {
  std::vector<std::string> hosts;
  for (std::string_view item : splitTopLevel(list)) {
    GYRE_ARG_CHECK(!item.empty(), variable, "='", list, "': empty host name");
    expandItem(item, list, variable, maxHosts, "", hosts);
  }
  return hosts;
}

std::vector<int> expandTasksPerNode(std::string_view spec, std::string_view variable, std::size_t maxNodes) {
  std::vector<int> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = spec.find(',', start);
    const std::string_view item = spec.substr(start, comma == std::string_view::npos ? comma : comma - start);
    std::string_view count = item;
    std::uint64_t repeat = 1;
    const auto paren = item.find('(');
    if (paren != std::string_view::npos) {
      count = item.substr(0, paren);
      const std::string_view times = item.substr(paren);
      GYRE_ARG_CHECK(times.size() > 3 && times.substr(0, 2) == "(x" && times.back() == ')' &&
                         parseUnsigned(times.substr(2, times.size() - 3), &repeat),
                     variable, "='", spec, "': malformed repeat '", times, "' (expected (xN))");
    }
    std::uint64_t tasks = 0;
    GYRE_ARG_CHECK(parseUnsigned(count, &tasks) && tasks >= 1 && tasks <= 1 << 20, variable, "='", spec,
                   "': '", count, "' is not a task count");
    GYRE_ARG_CHECK(repeat >= 1 && repeat <= maxNodes && out.size() + repeat <= maxNodes, variable, "='", spec,
                   "' describes more than ", maxNodes, " nodes");
    out.insert(out.end(), repeat, static_cast<int>(tasks));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string deriveSecret(std::string_view material) {
  const auth::Digest digest =
      auth::hmacSha256("gyre derived job secret v1", material.data(), material.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::uint16_t derivePort(std::string_view jobId) {
  // FNV-1a: stable across builds and platforms, unlike std::hash.
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : jobId) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return static_cast<std::uint16_t>(10000 + h % 22000);
}

std::string sanitizeForFileName(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return out;
}

}  // namespace gyre::launch
