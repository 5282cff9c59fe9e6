// `gyre bench`: gyre's benchmark drivers (collectives against OpenMPI, training throughput against
// a plain libtorch loop and PyTorch DDP, the parameter server), a library the gyre tool links so
// that the benchmarks ship with it while their code stays out of the CLI. See docs/benchmarks.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gyre::app {

// Adds `bench` and its subcommands (collectives, train, ps, comm, parallel) to `app`; when one is chosen,
// `action` is set to the code that runs it. `args` are the tool's arguments without the program
// name (the collectives benchmark passes them on to the ranks it starts).
void addBench(CLI::App& app, std::function<int()>& action, const std::vector<std::string>& args);

}  // namespace gyre::app
