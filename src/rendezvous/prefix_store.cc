// A view of another store with every key prefixed. The prefix is prepended as given: callers
// that want a separator include it ("world/"). It is a NetworkStore like the store it wraps.
#include "common/check.h"
#include "gyre/store.h"
#include "rendezvous/network_store.h"

namespace gyre {
namespace {

class PrefixStore final : public Store, public rendezvous::NetworkStore {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {
    GYRE_ARG_CHECK(inner_ != nullptr, "createPrefixStore: the inner store is null");
    setTimeout(inner_->timeout());
  }

  void set(const std::string& key, const Bytes& value) override { inner_->set(prefix_ + key, value); }
  Bytes get(const std::string& key, Duration timeout) override {
    return inner_->get(prefix_ + key, resolve(timeout));
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compareSet(prefix_ + key, expected, desired);
  }
  bool deleteKey(const std::string& key) override { return inner_->deleteKey(prefix_ + key); }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    inner_->wait(prefixed(keys), resolve(timeout));
  }
  // The inner store's, when it is reached over the network; loopback otherwise.
  std::string localAddress() const override {
    const auto* network = dynamic_cast<const rendezvous::NetworkStore*>(inner_.get());
    return network != nullptr ? network->localAddress() : "127.0.0.1";
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& key : keys) out.push_back(prefix_ + key);
    return out;
  }

  const std::string prefix_;
  const std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> createPrefixStore(std::string prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace gyre
