#include "launcher/hosts.h"

#include <charconv>
#include <set>
#include <sstream>

#include "common/check.h"
#include "common/socket.h"

namespace gyre::launcher {
namespace {

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

int parseSlots(const std::string& text, const std::string& where) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  GYRE_USAGE_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= 1, where,
                   ": slots must be a positive integer, not '", text, "'");
  return value;
}

// "host" or "host:N"; an IPv6 address must be bracketed to carry slots: "[::1]:2".
HostSlots parseEntry(const std::string& entry, const std::string& where, bool* hadSlots = nullptr) {
  GYRE_USAGE_CHECK(!entry.empty(), where, ": empty host name");
  HostSlots h;
  if (hadSlots != nullptr) *hadSlots = false;
  const auto colon = entry.rfind(':');
  const bool bracketed = entry.front() == '[';
  if (colon == std::string::npos || (!bracketed && entry.find(':') != colon)) {
    h.name = entry;  // no slots, or a bare IPv6 address
  } else {
    h.name = entry.substr(0, colon);
    h.slots = parseSlots(entry.substr(colon + 1), where + " '" + entry + "'");
    if (hadSlots != nullptr) *hadSlots = true;
  }
  if (h.name.size() > 2 && h.name.front() == '[' && h.name.back() == ']')
    h.name = h.name.substr(1, h.name.size() - 2);
  GYRE_USAGE_CHECK(!h.name.empty(), where, ": empty host name in '", entry, "'");
  GYRE_USAGE_CHECK(h.name.find_first_of(" \t'\"\\$`;&|<>") == std::string::npos, where, ": '", h.name,
                   "' is not a host name");
  return h;
}

}  // namespace

int totalSlots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const HostSlots& h : hosts) n += h.slots;
  return n;
}

std::vector<HostSlots> parseHostList(const std::string& list) {
  std::vector<HostSlots> hosts;
  std::stringstream in(list);
  for (std::string entry; std::getline(in, entry, ',');) hosts.push_back(parseEntry(trim(entry), "-H"));
  GYRE_USAGE_CHECK(!hosts.empty(), "-H: no hosts given");
  return hosts;
}

std::vector<HostSlots> parseHostfile(const std::string& text, const std::string& source) {
  std::vector<HostSlots> hosts;
  std::stringstream in(text);
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(lineNo);
    std::stringstream words(line);
    std::string first, second, extra;
    words >> first >> second >> extra;
    GYRE_USAGE_CHECK(extra.empty(), where, ": expected `host`, `host:N`, `host slots=N` or `host N`, got '",
                     line, "'");
    bool hadSlots = false;
    HostSlots h = parseEntry(first, where, &hadSlots);
    if (!second.empty()) {
      GYRE_USAGE_CHECK(!hadSlots, where, ": slots given twice in '", line, "'");
      if (second.starts_with("slots=")) second = second.substr(6);
      h.slots = parseSlots(second, where);
    }
    hosts.push_back(h);
  }
  GYRE_USAGE_CHECK(!hosts.empty(), source, ": no hosts in the hostfile");
  return hosts;
}

bool isLocalHost(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "::1" || name == net::hostName();
}

std::vector<HostPlacement> placeRanks(const std::vector<HostSlots>& hosts, int np) {
  std::set<std::string> seen;
  int slots = 0;
  for (const auto& h : hosts) {
    GYRE_USAGE_CHECK(seen.insert(h.name).second, "host '", h.name,
                     "' is listed twice; give it more slots instead");
    slots += h.slots;
  }
  if (np <= 0) np = slots;
  GYRE_USAGE_CHECK(np <= slots, "-np ", np, " asks for more workers than the ", slots,
                   " slots of the hosts given; add slots (host:N)");
  std::vector<HostPlacement> placement;
  int next = 0;
  for (const auto& h : hosts) {
    if (next == np) break;
    const int count = std::min(h.slots, np - next);
    placement.push_back({h.name, isLocalHost(h.name), next, count});
    next += count;
  }
  return placement;
}

}  // namespace gyre::launcher
