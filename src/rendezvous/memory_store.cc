// The in-process store: a table under a mutex, with a condition variable for waiters.
#include "common/check.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "rendezvous/store_table.h"

namespace gyre {
namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(value);
    {
      MutexLock lock(mutex_);
      table_.set(key, value);
    }
    changed_.notifyAll();
  }

  Bytes get(const std::string& key, Duration timeout) override {
    rendezvous::checkKey(key);
    MutexLock lock(mutex_);
    waitLocked({key}, resolve(timeout), "get");
    return *table_.find(key);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    rendezvous::checkKey(key);
    std::int64_t result = 0;
    {
      MutexLock lock(mutex_);
      result = table_.add(key, delta);
    }
    changed_.notifyAll();
    return result;
  }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(desired);
    Bytes result;
    {
      MutexLock lock(mutex_);
      result = table_.compareSet(key, expected, desired);
    }
    changed_.notifyAll();
    return result;
  }

  bool deleteKey(const std::string& key) override {
    rendezvous::checkKey(key);
    MutexLock lock(mutex_);
    return table_.erase(key);
  }

  bool check(const std::vector<std::string>& keys) override {
    rendezvous::checkKeys(keys);
    MutexLock lock(mutex_);
    return table_.containsAll(keys);
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rendezvous::checkKeys(keys);
    MutexLock lock(mutex_);
    waitLocked(keys, resolve(timeout), "wait");
  }

 private:
  void waitLocked(const std::vector<std::string>& keys, Duration timeout, const char* what)
      GYRE_REQUIRES(mutex_) {
    const Deadline deadline = rendezvous::deadlineAfter(timeout);
    if (!changed_.waitUntil(mutex_, deadline.at(),
                            [&]() GYRE_REQUIRES(mutex_) { return table_.containsAll(keys); }))
      GYRE_THROW(TimeoutError, "memory store ", what, " timed out after ", timeout.count(), " ms; missing ",
                 rendezvous::describeKeys(table_.missing(keys)));
  }

  Mutex mutex_;
  CondVar changed_;
  rendezvous::KeyValueTable table_ GYRE_GUARDED_BY(mutex_);
};

}  // namespace

std::shared_ptr<Store> createMemoryStore() {
  return std::make_shared<MemoryStore>();
}

}  // namespace gyre
