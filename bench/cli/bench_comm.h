// `gyre bench comm`: the gradient compressions (and allreduce algorithms) side by side on one
// training job: bytes per step, samples/s, time to a target accuracy and the final accuracy, on
// this host's workers or on hosts given to gyre run (tests/netns/ and scripts/compression-bench.sh
// give it shaped links). See docs/benchmarks.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addBenchComm(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
