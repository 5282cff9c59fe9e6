// How a bench repeats its configurations: in rounds (every configuration once, then again), so
// that a slow spell of the machine does not fall on every run of one configuration; a
// configuration is done, and its row can be printed, when its last round ends.
#pragma once

#include <cstddef>
#include <vector>

namespace gyre::app {

// For round 1..repeat and configuration 0..count-1: runs[i].push_back(run(i, round)); after the
// last round's run of configuration i, done(i, runs[i]). What run or done throws ends the sweep.
template <typename Run, typename RunOne, typename Done>
void sweepInRounds(std::size_t count, int repeat, RunOne run, Done done) {
  std::vector<std::vector<Run>> runs(count);
  for (int round = 1; round <= repeat; ++round)
    for (std::size_t i = 0; i < count; ++i) {
      runs[i].push_back(run(i, round));
      if (round == repeat) done(i, runs[i]);
    }
}

}  // namespace gyre::app
