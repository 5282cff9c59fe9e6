// `gyre bench collectives`: starts N local ranks, sweeps message sizes for one collective, and
// prints nccl-tests-style bandwidth columns, optionally beside OpenMPI's own collective.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gyre::app {

// Adds the `collectives` subcommand to `bench`. When it is chosen, `action` is set to the code
// that runs it; `args` are the tool's arguments (without argv[0]), reused on the command line
// of the ranks it starts.
void addBenchCollectives(CLI::App& bench, std::function<int()>& action, const std::vector<std::string>& args);

}  // namespace gyre::app
