// `gyre run` and its per-host helper `gyre agent` (hidden; started by `gyre run`).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addRun(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
