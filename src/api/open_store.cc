// openLaunchStore(): the store a launcher set up for this process (open_store.h).
#include "api/open_store.h"

#include <netdb.h>
#include <netinet/in.h>

#include <cstdlib>

#include "api/store_over_mpi.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/socket.h"
#include "rendezvous/connect.h"
#include "rendezvous/host_store.h"

namespace gyre {
namespace {

// True when `host` resolves to a loopback address only (Debian maps its host name to
// 127.0.1.1, which other hosts cannot reach).
bool resolvesToLoopbackOnly(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return false;
  bool loopbackOnly = true;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      const auto addr = ntohl(reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr);
      loopbackOnly &= (addr >> 24) == 127;
    } else if (ai->ai_family == AF_INET6) {
      loopbackOnly &=
          IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr) != 0;
    }
  }
  freeaddrinfo(list);
  return loopbackOnly;
}

// Where the hosting rank listens: GYRE_IFACE, else the store address's own host.
std::string storeBindAddress(const LaunchInfo& info, const CommunicatorOptions& options,
                             const std::string& host) {
  if (!options.interface.empty()) return net::resolveInterface(options.interface);
  if (info.localSize < info.size && resolvesToLoopbackOnly(host)) {
    log::warn("the store host '", host, "' resolves to loopback on rank ", info.rank,
              " but the job spans several hosts: the store listens on all interfaces; set GYRE_IFACE to "
              "choose one");
    return host.find(':') != std::string::npos ? "::" : "0.0.0.0";
  }
  return host;
}

}  // namespace

std::shared_ptr<Store> openLaunchStore(LaunchInfo& info, const config::Env& env,
                                       CommunicatorOptions& options) {
  if (info.storeOverMpi) return openStoreOverMpi(info, options);
  if (info.storeAddress.empty()) return createMemoryStore();  // a world of one
  if (info.storeAddress.starts_with("file:")) {
    auto store = createFileStore(info.storeAddress.substr(5));
    // mpirun's job ids can repeat; its per-job random key keeps a stale file's keys out of sight.
    auto it = env.find("OMPI_MCA_orte_precondition_transports");
    if (info.launcher == "mpirun" && it != env.end() && !it->second.empty())
      return createPrefixStore(it->second + "/", std::move(store));
    return store;
  }
  if (info.hostStore) {
    const auto [host, port] = net::splitHostPort(info.storeAddress);
    const std::string bind = storeBindAddress(info, options, host);
    log::info("rank ", info.rank, " hosts the store on ", net::joinHostPort(bind, port));
    return rendezvous::hostTcpStore(options.secret, bind, port, options.timeout);
  }
  return rendezvous::connectStore(info.storeAddress, options.secret, options.timeout);
}

}  // namespace gyre
