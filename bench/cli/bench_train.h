// `gyre bench train`: training throughput of gyre's data parallelism against the project's plain
// single-process libtorch loop and, with --baseline ddp, PyTorch DDP (gloo), all in one
// invocation, with the threads of every process set exactly; prints the table, the step-time split
// and gyre's throughput goals with PASS/MISS. The gyre tool itself never links libtorch: every
// configuration runs as child processes of gyre_train_worker (next to gyre), under `gyre run` for
// more than one worker, and python3 for DDP. See docs/benchmarks.md, `gyre bench train`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

// Adds the `train` subcommand to `bench`; when it is chosen, `action` is set to the code that
// runs it. Exit codes: 0 when every configuration ran (whatever the targets say), 2 for bad
// flags or missing programs, 1 when a run failed, 128 + signal when interrupted.
void addBenchTrain(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
