#include "launcher/job_store.h"

#include <algorithm>

#include "common/auth.h"
#include "common/check.h"
#include "common/socket.h"

namespace gyre::launcher {

std::unique_ptr<TcpStoreServer> listenAvoiding(const std::function<std::unique_ptr<TcpStoreServer>()>& listen,
                                               const std::vector<std::uint16_t>& usedPorts) {
  // A listener on a used port stays open while the next one binds, so the kernel cannot hand that
  // port out again: each try gets another port, and there are far more free ports than used ones.
  std::vector<std::unique_ptr<TcpStoreServer>> refused;
  std::unique_ptr<TcpStoreServer> server = listen();
  while (std::find(usedPorts.begin(), usedPorts.end(), server->port()) != usedPorts.end()) {
    refused.push_back(std::move(server));
    server = listen();
  }
  return server;
}

JobStore startJobStore(const std::string& networkInterface, bool anyRemote, bool requireRemote,
                       const std::vector<std::uint16_t>& usedPorts) {
  JobStore store;
  store.secret = auth::generateSecret();
  std::string bind = anyRemote ? "0.0.0.0" : "127.0.0.1";
  if (!networkInterface.empty()) {
    try {
      bind = net::resolveInterface(networkInterface);
    } catch (const InvalidArgument&) {
      // Not an interface of this host: it names the workers' interface only.
    }
  }
  store.server = listenAvoiding([&] { return createTcpStoreServer(store.secret, bind, 0); }, usedPorts);
  const std::uint16_t port = store.server->port();
  if (bind != "0.0.0.0") {
    store.localCandidates = store.remoteCandidates = {net::joinHostPort(bind, port)};
    return store;
  }
  store.localCandidates = {net::joinHostPort("127.0.0.1", port)};
  for (const std::string& a : net::externalAddresses())
    if (a.find(':') == std::string::npos) store.remoteCandidates.push_back(net::joinHostPort(a, port));
  GYRE_USAGE_CHECK(!requireRemote || !store.remoteCandidates.empty(),
                   "this host has no non-loopback IPv4 address for remote hosts to reach the job's store");
  return store;
}

}  // namespace gyre::launcher
