#include "python/c10d_store.h"

#include <string>
#include <utility>
#include <vector>

#include "gyre/errors.h"

namespace gyre::python {
namespace {

std::string joined(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const Bytes& value) override { store_->set(key, value); }

  Bytes get(const std::string& key, Duration timeout) override {
    wait({key}, timeout);
    return store_->get(key);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return store_->compareSet(key, expected, desired);
  }

  bool deleteKey(const std::string& key) override { return store_->deleteKey(key); }

  bool check(const std::vector<std::string>& keys) override { return store_->check(keys); }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    const Duration limit = resolve(timeout);
    try {
      store_->wait(keys, limit);
    } catch (const std::exception& e) {
      // c10d says a time-out as c10::Error ("Socket Timeout", "Wait timeout"); gyre's rendezvous
      // waits on TimeoutError. Anything else (a lost connection) is the store's failure.
      const std::string what = e.what();
      if (what.find("imeout") != std::string::npos)
        throw TimeoutError("torch.distributed's store did not have " + joined(keys) + " within " +
                           std::to_string(limit.count()) + " ms (" + what + ")");
      throw Error("torch.distributed's store failed waiting for " + joined(keys) + ": " + what);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::shared_ptr<Store> wrapC10dStore(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStore>(std::move(store));
}

}  // namespace gyre::python
