// `gyre info`: what this gyre is and what it can use on this machine.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addInfo(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
