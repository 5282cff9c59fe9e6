// `gyre tune`: hyperparameter search over trials of gyre train or of any command, with Ray Tune's
// searchers and schedulers (src/tune/). See docs/tune.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gyre::app {

// `command`: what followed `--` on the command line (main.cc cuts it off before parsing), the
// trial command when not empty.
void addTune(CLI::App& app, std::function<int()>& action, const std::vector<std::string>& command);

}  // namespace gyre::app
