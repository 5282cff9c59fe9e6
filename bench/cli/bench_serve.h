// `gyre bench serve`: requests/s and latency of `gyre serve` on one model, the baseline (one
// request per forward pass) beside dynamic batching, on the same HTTP server, in the same run.
// See docs/serving.md, "gyre bench serve".
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addBenchServe(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
