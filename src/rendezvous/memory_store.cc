// The in-process store: a table under a mutex, with a condition variable for waiters.
#include <condition_variable>
#include <mutex>

#include "common/check.h"
#include "common/clock.h"
#include "rendezvous/store_table.h"

namespace gyre {
namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(value);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      table_.set(key, value);
    }
    changed_.notify_all();
  }

  Bytes get(const std::string& key, Duration timeout) override {
    rendezvous::checkKey(key);
    std::unique_lock<std::mutex> lock(mutex_);
    waitLocked(lock, {key}, resolve(timeout), "get");
    return *table_.find(key);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    rendezvous::checkKey(key);
    std::int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      result = table_.add(key, delta);
    }
    changed_.notify_all();
    return result;
  }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(desired);
    Bytes result;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      result = table_.compareSet(key, expected, desired);
    }
    changed_.notify_all();
    return result;
  }

  bool deleteKey(const std::string& key) override {
    rendezvous::checkKey(key);
    std::lock_guard<std::mutex> lock(mutex_);
    return table_.erase(key);
  }

  bool check(const std::vector<std::string>& keys) override {
    rendezvous::checkKeys(keys);
    std::lock_guard<std::mutex> lock(mutex_);
    return table_.containsAll(keys);
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rendezvous::checkKeys(keys);
    std::unique_lock<std::mutex> lock(mutex_);
    waitLocked(lock, keys, resolve(timeout), "wait");
  }

 private:
  void waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, Duration timeout,
                  const char* what) {
    const Deadline deadline = rendezvous::deadlineAfter(timeout);
    if (!changed_.wait_until(lock, deadline.at(), [&] { return table_.containsAll(keys); }))
      GYRE_THROW(TimeoutError, "memory store ", what, " timed out after ", timeout.count(), " ms; missing ",
                 rendezvous::describeKeys(table_.missing(keys)));
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  rendezvous::KeyValueTable table_;
};

}  // namespace

std::shared_ptr<Store> createMemoryStore() {
  return std::make_shared<MemoryStore>();
}

}  // namespace gyre
