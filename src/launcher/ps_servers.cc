#include "launcher/ps_servers.h"

#include "common/check.h"

namespace gyre::launcher {

std::vector<ServerPlacement> placeServers(const std::vector<HostPlacement>& workers, int servers) {
  if (servers <= 0) return {};
  GYRE_USAGE_CHECK(!workers.empty(), "--servers needs at least one host to run the servers on");
  std::vector<ServerPlacement> placement;
  for (const HostPlacement& w : workers) placement.push_back({w.host, w.local, {}});
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
