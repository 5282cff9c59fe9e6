#include "api/store_over_mpi.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "common/auth.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/socket.h"
#include "rendezvous/host_store.h"
#include "transport/mpi/mpi_transport.h"

namespace gyre {
namespace {

std::string storeHost(const LaunchInfo& info, const CommunicatorOptions& options) {
  if (!options.interface.empty()) return net::resolveInterface(options.interface);
  if (info.localSize == info.size) return "127.0.0.1";
  const std::vector<std::string> external = net::externalAddresses();
  GYRE_ARG_CHECK(!external.empty(), "rank 0 should host the store for ranks on other hosts, but host ",
                 net::hostName(), " has no external address; set GYRE_IFACE");
  log::info("rank 0 hosts the store on ", external.front(),
            ", this host's first external address (GYRE_IFACE chooses another)");
  return external.front();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

std::shared_ptr<Store> openStoreOverMpi(LaunchInfo& info, CommunicatorOptions& options) {
  // Rank 0 broadcasts "ok\n<address>\n<secret or empty>" or "error\n<why>".
  std::shared_ptr<Store> hosted;
  std::string message;
  const bool freshSecret = options.secret.empty();
  if (info.rank == 0) {
    try {
      if (freshSecret) options.secret = auth::generateSecret();
      hosted = rendezvous::hostTcpStore(options.secret, storeHost(info, options), 0, options.timeout);
      message = "ok\n" + rendezvous::hostedStoreAddress(*hosted) + "\n" + (freshSecret ? options.secret : "");
    } catch (const Error& e) {
      message = std::string("error\n") + e.what();
      transport::mpi::broadcastFromRoot(message);  // the others must not wait for an address
      throw;
    }
  }
  const std::string answer = transport::mpi::broadcastFromRoot(message);
  const std::vector<std::string> parts = lines(answer);
  if (parts.size() < 2 || parts[0] != "ok")
    GYRE_THROW(Error, "rank 0 could not host the store: ",
               answer.substr(std::min(answer.size(), answer.find('\n') + 1)));
  info.storeAddress = parts[1];
  log::info("rank ", info.rank, ": store ", info.storeAddress, " (from rank 0 over MPI)");
  if (hosted) return hosted;
  if (freshSecret) {
    GYRE_ARG_CHECK(parts.size() >= 3 && !parts[2].empty(),
                   "rank 0 sent no secret, but this rank has none: set GYRE_SECRET on every rank or on none");
    options.secret = parts[2];
  }
  return connectTcpStore(info.storeAddress, options.secret, options.timeout);
}

}  // namespace gyre
