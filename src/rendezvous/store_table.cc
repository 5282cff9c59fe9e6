#include "rendezvous/store_table.h"

#include <charconv>

#include "common/check.h"

namespace gyre::rendezvous {

void checkKey(const std::string& key) {
  GYRE_ARG_CHECK(key.size() <= kMaxKeyBytes, "store key of ", key.size(), " bytes exceeds the limit of ",
                 kMaxKeyBytes);
}

void checkKeys(const std::vector<std::string>& keys) {
  GYRE_ARG_CHECK(keys.size() <= kMaxKeysPerCall, "a store call names ", keys.size(), " keys; the limit is ",
                 kMaxKeysPerCall);
  for (const auto& key : keys) checkKey(key);
}

void checkValue(const Bytes& value) {
  GYRE_ARG_CHECK(value.size() <= kMaxValueBytes, "store value of ", value.size(),
                 " bytes exceeds the limit of ", kMaxValueBytes);
}

std::int64_t parseCounter(const std::string& key, const Bytes& value) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  std::int64_t out = 0;
  const auto [stop, ec] = std::from_chars(begin, end, out);
  GYRE_ARG_CHECK(!value.empty() && ec == std::errc() && stop == end, "store key '", key,
                 "' holds a value that is not an integer; add() needs a counter");
  return out;
}

Bytes formatCounter(std::int64_t value) {
  const std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

Deadline deadlineAfter(std::chrono::milliseconds timeout) {
  if (timeout >= std::chrono::hours(24 * 365)) return Deadline::never();
  return Deadline::after(timeout);
}

std::string describeKeys(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 4;
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) out += (i == 0 ? "'" : ", '") + keys[i] + "'";
  if (keys.size() > kShown) out += " and " + std::to_string(keys.size() - kShown) + " more";
  return out;
}

const Bytes* KeyValueTable::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

std::int64_t KeyValueTable::add(const std::string& key, std::int64_t delta) {
  const Bytes* current = find(key);
  const std::int64_t before = current == nullptr ? 0 : parseCounter(key, *current);
  std::int64_t after = 0;
  GYRE_ARG_CHECK(!__builtin_add_overflow(before, delta, &after), "store add('", key, "', ", delta,
                 ") overflows the counter ", before);
  map_[key] = formatCounter(after);
  return after;
}

Bytes KeyValueTable::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return {};
    map_.emplace(key, desired);
    return desired;
  }
  if (!expected.empty() && it->second == expected) it->second = desired;
  return it->second;
}

bool KeyValueTable::containsAll(const std::vector<std::string>& keys) const {
  for (const auto& key : keys)
    if (map_.find(key) == map_.end()) return false;
  return true;
}

std::vector<std::string> KeyValueTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& key : keys)
    if (map_.find(key) == map_.end()) out.push_back(key);
  return out;
}

}  // namespace gyre::rendezvous
