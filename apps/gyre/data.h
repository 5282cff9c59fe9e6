// `gyre data`: a data set's folder packed into record shards (`gyre data pack`) and a packed set
// described and checked (`gyre data info`). libtorch-free (src/data/). docs/data.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addData(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
