// `gyre bench parallel`: data, pipeline and sharded parallelism side by side on one model and global
// batch, in one invocation: each layout is a gyre_train_worker job under `gyre run` with one
// thread per worker; per row samples/s, the measured pipeline bubble and its formula, memory per
// worker and the step split, then the model-parallel targets with PASS/MISS. See
// docs/benchmarks.md, `gyre bench parallel`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

// Adds the `parallel` subcommand to `bench`; when it is chosen, `action` is set to the code that
// runs it. Exit codes: 0 when every layout ran (whatever the targets say), 2 for bad flags or a
// missing worker, 1 when a run failed, 128 + signal when interrupted.
void addBenchParallel(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
