// `gyre serve`: a trained model behind HTTP (docs/serving.md). The gyre tool checks the flags and
// replaces itself with gyre_serve_worker (libtorch), so that the signals reach the server and the
// tool stays libtorch-free.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addServe(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
