// The etcd store: the Store contract on an etcd cluster's keys (rendezvous/etcd_client.h), so a
// job's rendezvous state outlives any one of its hosts. Waits poll: a get() of a missing key
// reads it again after 2 ms, then less and less often, at most every 25 ms.
#include <algorithm>
#include <thread>

#include "common/check.h"
#include "rendezvous/etcd_client.h"
#include "rendezvous/network_store.h"
#include "rendezvous/store_table.h"

namespace gyre {
namespace {

using rendezvous::EtcdClient;

class Backoff {
 public:
  void pause(const Deadline& deadline) {
    std::this_thread::sleep_for(std::min(next_, std::chrono::milliseconds(deadline.remainingMs(25))));
    next_ = std::min(next_ * 3 / 2, std::chrono::milliseconds(25));
  }

 private:
  std::chrono::milliseconds next_{2};
};

class EtcdStore final : public Store, public rendezvous::NetworkStore {
 public:
  EtcdStore(const rendezvous::EtcdUrl& url, std::chrono::milliseconds timeout)
      : prefix_(url.prefix), where_(rendezvous::formatEtcdUrl(url)), client_(url.endpoints, timeout) {
    setTimeout(timeout);
  }

  std::string localAddress() const override { return client_.localAddress(); }

  void set(const std::string& key, const Bytes& value) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(value);
    client_.put(prefix_ + key, value);
  }

  Bytes get(const std::string& key, Duration timeout) override {
    rendezvous::checkKey(key);
    const Duration t = resolve(timeout);
    const Deadline deadline = rendezvous::deadlineAfter(t);
    Backoff backoff;
    while (true) {
      if (auto kv = client_.get(prefix_ + key, callDeadline(deadline))) return std::move(kv->value);
      if (deadline.expired()) timedOut("get", t, {key});
      backoff.pause(deadline);
    }
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    rendezvous::checkKey(key);
    while (true) {
      const auto kv = client_.get(prefix_ + key);
      const std::int64_t next = (kv ? rendezvous::parseCounter(key, kv->value) : 0) + delta;
      if (client_.putIfRevision(prefix_ + key, kv ? kv->modRevision : 0, rendezvous::formatCounter(next)))
        return next;
    }
  }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(expected);
    rendezvous::checkValue(desired);
    const bool swapped = expected.empty() ? client_.putIfRevision(prefix_ + key, 0, desired)
                                          : client_.putIfValue(prefix_ + key, expected, desired);
    if (swapped) return desired;
    auto kv = client_.get(prefix_ + key);
    return kv ? std::move(kv->value) : Bytes{};
  }

  bool deleteKey(const std::string& key) override {
    rendezvous::checkKey(key);
    return client_.erase(prefix_ + key);
  }

  bool check(const std::vector<std::string>& keys) override {
    rendezvous::checkKeys(keys);
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return client_.get(prefix_ + k).has_value(); });
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rendezvous::checkKeys(keys);
    const Duration t = resolve(timeout);
    const Deadline deadline = rendezvous::deadlineAfter(t);
    std::vector<std::string> missing = keys;
    Backoff backoff;
    while (true) {
      std::erase_if(missing, [&](const std::string& k) {
        return client_.get(prefix_ + k, callDeadline(deadline)).has_value();
      });
      if (missing.empty()) return;
      if (deadline.expired()) timedOut("wait", t, missing);
      backoff.pause(deadline);
    }
  }

 private:
  // A read inside a wait gives up with the wait (but gets a second at least): an etcd that does
  // not answer is an Error naming its members then, not a wait far past its time-out.
  static Deadline callDeadline(const Deadline& wait) {
    return Deadline(std::max(wait.at(), Clock::now() + std::chrono::seconds(1)));
  }

  [[noreturn]] void timedOut(const char* what, Duration t, const std::vector<std::string>& missing) const {
    GYRE_THROW(TimeoutError, "etcd store ", where_, " ", what, " timed out after ", t.count(),
               " ms; missing ", rendezvous::describeKeys(missing));
  }

  std::string prefix_;
  std::string where_;
  EtcdClient client_;
};

}  // namespace

std::shared_ptr<Store> connectEtcdStore(const std::string& url, std::chrono::milliseconds timeout) {
  return std::make_shared<EtcdStore>(rendezvous::parseEtcdUrl(url), timeout);
}

}  // namespace gyre
