// `gyre bench data`: images per second of gyre::data::loadImageFolder beside PyTorch's
// DataLoader(ImageFolder(...), num_workers=N) on the same files, in the same run. See
// docs/data.md, "gyre bench data".
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addBenchData(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
