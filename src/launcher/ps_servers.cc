#include "launcher/ps_servers.h"

#include <algorithm>

#include "common/check.h"

namespace gyre::launcher {

void checkServerHosts(const std::vector<std::string>& serverHosts) {
  for (std::size_t i = 0; i < serverHosts.size(); ++i) {
    GYRE_USAGE_CHECK(!serverHosts[i].empty(), "--server-hosts: host ", i + 1,
                     " of the list is empty; expected host1,host2,...");
    GYRE_USAGE_CHECK(std::find(serverHosts.begin(), serverHosts.begin() + static_cast<std::ptrdiff_t>(i),
                               serverHosts[i]) == serverHosts.begin() + static_cast<std::ptrdiff_t>(i),
                     "--server-hosts: ", serverHosts[i],
                     " is given twice; list each host once (server i runs "
                     "on host i mod the number of hosts)");
  }
}

std::vector<ServerPlacement> placeServers(const std::vector<HostPlacement>& workers, int servers,
                                          const std::vector<std::string>& serverHosts) {
  if (servers <= 0) return {};
  checkServerHosts(serverHosts);
  std::vector<ServerPlacement> placement;
  if (serverHosts.empty()) {
    GYRE_USAGE_CHECK(!workers.empty(), "--servers needs at least one host to run the servers on");
    for (const HostPlacement& w : workers) placement.push_back({w.host, w.local, {}});
  } else {
    for (const std::string& host : serverHosts) placement.push_back({host, isLocalHost(host), {}});
  }
  for (int i = 0; i < servers; ++i)
    placement[static_cast<std::size_t>(i) % placement.size()].indices.push_back(i);
  std::erase_if(placement, [](const ServerPlacement& p) { return p.indices.empty(); });
  return placement;
}

std::string serverLostLine(int index, int servers, const ServerState& state, const std::string& how) {
  std::string line = "ps server " + std::to_string(index);
  if (state.pid > 0) line += " (pid " + std::to_string(state.pid) + ")";
  line += " on host " + state.host + " " + how;
  if (servers < 2) return line + "; it has no backup (--servers 1), so the workers cannot go on without it";
  return line + "; workers fail over to its backup, ps server " + std::to_string((index + 1) % servers);
}

}  // namespace gyre::launcher
