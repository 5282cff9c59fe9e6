#include "ps/plan.h"

#include <algorithm>

#include "common/check.h"

namespace gyre::ps {

Plan Plan::make(const std::vector<std::size_t>& sizes, int numServers, bool replicate) {
  GYRE_ARG_CHECK(numServers >= 1, "a parameter-server table needs at least one server, not ", numServers);
  Plan plan;
  plan.slicesOfKey.resize(sizes.size());
  plan.elementsOnServer.assign(static_cast<std::size_t>(numServers), 0);
  std::size_t total = 0;
  for (std::size_t size : sizes) total += size;
  const auto servers = static_cast<std::size_t>(numServers);
  // Server s holds the flat range [bound(s), bound(s + 1)).
  auto bound = [&](std::size_t s) { return total / servers * s + std::min(s, total % servers); };
  std::size_t flat = 0;
  std::size_t server = 0;
  for (std::size_t key = 0; key < sizes.size(); ++key) {
    std::size_t offset = 0;
    while (offset < sizes[key]) {
      while (flat >= bound(server + 1)) ++server;
      const std::size_t length = std::min(sizes[key] - offset, bound(server + 1) - flat);
      Slice slice;
      slice.id = static_cast<int>(plan.slices.size());
      slice.key = static_cast<int>(key);
      slice.offset = offset;
      slice.length = length;
      slice.primary = static_cast<int>(server);
      slice.backup = numServers > 1 && replicate ? static_cast<int>((server + 1) % servers) : -1;
      plan.slicesOfKey[key].push_back(slice.id);
      plan.elementsOnServer[server] += length;
      plan.slices.push_back(slice);
      offset += length;
      flat += length;
    }
  }
  return plan;
}

}  // namespace gyre::ps
