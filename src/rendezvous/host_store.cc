#include "rendezvous/host_store.h"

#include "common/check.h"
#include "common/socket.h"
#include "rendezvous/network_store.h"

namespace gyre::rendezvous {
namespace {

// Forwards to the client; owns the server, which outlives the client.
class HostedStore final : public Store, public NetworkStore {
 public:
  HostedStore(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {
    setTimeout(client_->timeout());
  }

  void set(const std::string& key, const Bytes& value) override { client_->set(key, value); }
  Bytes get(const std::string& key, Duration timeout) override { return client_->get(key, resolve(timeout)); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return client_->add(key, delta); }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return client_->compareSet(key, expected, desired);
  }
  bool deleteKey(const std::string& key) override { return client_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return client_->check(keys); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    client_->wait(keys, resolve(timeout));
  }
  std::string localAddress() const override {
    return dynamic_cast<const NetworkStore&>(*client_).localAddress();
  }
  std::string serverAddress() const { return server_->address(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::shared_ptr<Store> client_;
};

}  // namespace

std::shared_ptr<Store> hostTcpStore(const std::string& secret, const std::string& bindAddress,
                                    std::uint16_t port, std::chrono::milliseconds timeout) {
  auto server = createTcpStoreServer(secret, bindAddress, port);
  std::string host = bindAddress;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  auto client = connectTcpStore(net::joinHostPort(host, server->port()), secret, timeout);
  return std::make_shared<HostedStore>(std::move(server), std::move(client));
}

std::string hostedStoreAddress(const Store& store) {
  const auto* hosted = dynamic_cast<const HostedStore*>(&store);
  GYRE_ARG_CHECK(hosted != nullptr, "hostedStoreAddress: the store was not made by hostTcpStore");
  return hosted->serverAddress();
}

}  // namespace gyre::rendezvous
