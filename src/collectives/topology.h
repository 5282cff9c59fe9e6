// The hosts of a communicator, as the hierarchical allreduce sees them: which ranks share a host
// and the groups its phases run in. Built once per communicator from the mesh's host indices
// (transport/mesh.h), so every rank holds the same layout.
#pragma once

#include <span>
#include <vector>

#include "collectives/cost_model.h"

namespace gyre::collectives {

struct Topology {
  // The ranks of each host, ascending; hosts in the order of their lowest rank.
  std::vector<std::vector<int>> hosts;
  int host = 0;   // this rank's host
  int local = 0;  // this rank's index among its host's ranks
  // The group this rank allreduces with across hosts: when every host has as many ranks, the
  // rank of this local index on every host (each such group carries one block of the vector);
  // otherwise the first rank of every host (meaningful on those ranks only).
  std::vector<int> across;
  // The model the across group's allreduce is chosen by: its links are the ones between hosts,
  // so it is calibrated on that group, separately from the communicator's own model.
  CostModel acrossCost;

  // hostIndices[r]: the host of rank r (numbered in the order of their lowest rank).
  static Topology of(std::span<const int> hostIndices, int rank);

  // Every host has the same number of ranks.
  bool uniform() const;
  // More than one host, and one of them with more than one rank: the layout where reducing
  // inside each host first takes bytes off the links between hosts.
  bool layered() const;
};

}  // namespace gyre::collectives
