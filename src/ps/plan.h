// How a table's keys are cut into slices and placed on servers (see include/gyre/ps.h): the
// keys laid end to end in one flat range of floats, cut into numServers equal parts; a slice is
// the piece of one key that falls in one part. Slice ids run in flat order. Every worker and
// server computes the same plan from the same sizes.
#pragma once

#include <cstddef>
#include <vector>

namespace gyre::ps {

struct Slice {
  int id = 0;
  int key = 0;
  std::size_t offset = 0;  // within the key, in elements
  std::size_t length = 0;  // elements
  int primary = 0;
  int backup = -1;  // the next server; -1 with a single server or without replication
};

struct Plan {
  std::vector<Slice> slices;
  std::vector<std::vector<int>> slicesOfKey;  // slice ids of each key, in offset order
  std::vector<std::size_t> elementsOnServer;

  // Throws InvalidArgument for numServers < 1. replicate false: no backups.
  static Plan make(const std::vector<std::size_t>& sizes, int numServers, bool replicate = true);
};

}  // namespace gyre::ps
