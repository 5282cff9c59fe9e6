// The semantics every Store shares (limits, counters, compare-and-set), over a plain map, so
// the memory, file and TCP stores cannot drift apart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "gyre/store.h"

namespace gyre::rendezvous {

using Bytes = Store::Bytes;

// Limits every store enforces (and the TCP store's wire format checks before allocating).
constexpr std::size_t kMaxKeyBytes = 4096;
constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxKeysPerCall = 1024;

// Throw InvalidArgument naming the limit.
void checkKey(const std::string& key);
void checkKeys(const std::vector<std::string>& keys);
void checkValue(const Bytes& value);

// Counters (Store::add) are stored as decimal text, so getString() reads them.
std::int64_t parseCounter(const std::string& key, const Bytes& value);
Bytes formatCounter(std::int64_t value);

// A deadline `timeout` from now; time-outs too long to add to the clock (a year or more,
// Duration::max()) mean never.
Deadline deadlineAfter(std::chrono::milliseconds timeout);

// "'a', 'b' and 3 more" for error messages.
std::string describeKeys(const std::vector<std::string>& keys);

// A key-value map with the Store operations' semantics. Not thread-safe: the owner locks.
class KeyValueTable {
 public:
  void set(const std::string& key, Bytes value) { map_[key] = std::move(value); }
  // Null when absent. The pointer is valid until the next change.
  const Bytes* find(const std::string& key) const;
  // Throws InvalidArgument when the stored value is not an integer or the sum overflows.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // Store::compareSet; returns the value stored afterwards (empty when absent).
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool erase(const std::string& key) { return map_.erase(key) > 0; }
  bool containsAll(const std::vector<std::string>& keys) const;
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  void clear() { map_.clear(); }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace gyre::rendezvous
