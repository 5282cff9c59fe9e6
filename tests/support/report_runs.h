// Run directories as gyre train writes them (config.json, metrics.jsonl, steps.jsonl,
// progress.jsonl), made up with known figures, for the tests of gyre report: throughput follows
// Amdahl's law with a given serial fraction, each rank's step time is the same but for an
// optional straggler, and parameter-server runs carry a staleness histogram.
#pragma once

#include <string>

namespace gyre::test {

struct FakeRun {
  int world = 1;
  int epochs = 2;
  int stepsPerEpoch = 50;
  double serialFraction = 0.1;   // samples/s = 1000 * amdahl(f, world)
  int straggler = -1;            // this rank's step time is 3x the others'
  bool parameterServer = false;  // mode "async" with a staleness histogram
};

// Writes the run's files into `dir` (created).
void writeFakeRun(const std::string& dir, const FakeRun& run);

}  // namespace gyre::test
