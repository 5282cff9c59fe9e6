// `gyre train`: the built-in data-parallel trainer (Fashion-MNIST, mlp or cnn). It checks the
// flags, prepares a run directory and starts N gyre_train_worker processes on this host through
// the launcher, as `gyre run` would. The gyre tool stays libtorch-free: the training lives in the
// worker, built beside it when libtorch is available. See docs/training.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addTrain(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
