#include "collectives/topology.h"

#include <algorithm>

#include "common/check.h"

namespace gyre::collectives {

Topology Topology::of(std::span<const int> hostIndices, int rank) {
  GYRE_ARG_CHECK(rank >= 0 && static_cast<std::size_t>(rank) < hostIndices.size(), "rank ", rank,
                 " is not among the ", hostIndices.size(), " ranks with a host");
  Topology t;
  for (std::size_t r = 0; r < hostIndices.size(); ++r) {
    const int h = hostIndices[r];
    GYRE_ARG_CHECK(h >= 0 && static_cast<std::size_t>(h) <= t.hosts.size(), "rank ", r, " has host index ", h,
                   ": hosts are numbered in the order of their lowest rank");
    if (static_cast<std::size_t>(h) == t.hosts.size()) t.hosts.emplace_back();
    t.hosts[h].push_back(static_cast<int>(r));
  }
  t.host = hostIndices[rank];
  const std::vector<int>& mine = t.hosts[t.host];
  t.local = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  const int index = t.uniform() ? t.local : 0;
  for (const std::vector<int>& ranks : t.hosts) t.across.push_back(ranks[index]);
  return t;
}

bool Topology::uniform() const {
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const std::vector<int>& ranks) { return ranks.size() == hosts.front().size(); });
}

bool Topology::layered() const {
  return hosts.size() > 1 && std::any_of(hosts.begin(), hosts.end(),
                                         [](const std::vector<int>& ranks) { return ranks.size() > 1; });
}

}  // namespace gyre::collectives
