#include "rendezvous/connect.h"

namespace gyre::rendezvous {

std::shared_ptr<Store> connectStore(const std::string& address, const std::string& secret,
                                    std::chrono::milliseconds timeout) {
  if (address.starts_with("file:")) return createFileStore(address.substr(5));
  if (address.starts_with("etcd://")) return connectEtcdStore(address, timeout);
  return connectTcpStore(address, secret, timeout);
}

}  // namespace gyre::rendezvous
