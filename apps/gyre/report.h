// `gyre report RUN_DIR...`: one self-contained HTML page (and PNGs) of one run or a comparison of
// runs: loss and accuracy curves, throughput, the step split, speedup and efficiency against
// workers with Amdahl's fit, per-rank step times, staleness, collectives' bandwidth
// (src/report/). See docs/report.md.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

void addReport(CLI::App& app, std::function<int()>& action);

}  // namespace gyre::app
