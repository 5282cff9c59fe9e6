// `gyre ps-server`: one parameter server process of a `gyre run --servers S` job, started by the
// launcher (not for direct use); everything it needs comes from the environment.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addPsServer(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
