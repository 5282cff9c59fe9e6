// `gyre bench ps`: the parameter server measured two ways. Part 1, throughput versus
// the number of servers: servers and workers in this process (bench_ps_throughput.h). Part 2,
// time to a test accuracy on Fashion-MNIST for allreduce and the parameter-server modes, with and
// without a straggler: one `gyre train` after another (this same executable), read back from
// their run directories. See docs/benchmarks.md, `gyre bench ps`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

// Adds the `ps` subcommand to `bench`; when it is chosen, `action` is set to the code that runs
// it. Exit codes: 0 when every measurement ran (whether or not a target was reached), 2 for bad
// flags, 1 when a measurement or run failed (its row says why), 128 + signal when interrupted.
void addBenchPs(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
