// Process-wide counts of the collectives this process ran, by operation and algorithm: calls,
// bytes (the message each rank contributes: count x element size, or the sum of its counts) and
// seconds on the communicator's thread. What the Prometheus endpoint exposes
// (gyre_collective_*_total). Thread-safe; a collective adds one entry under a mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::collectives {

struct Tally {
  std::string op, algorithm;
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

void addTally(const char* op, std::string_view algorithm, std::uint64_t bytes, double seconds);

// Every (op, algorithm) seen so far, ordered by op then algorithm.
std::vector<Tally> tallies();

}  // namespace gyre::collectives
