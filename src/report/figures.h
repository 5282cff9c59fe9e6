// The figures of `gyre report`: each a chart (gyre_plot's SVG) with an id, for the page and its
// PNG, and a caption that says what it shows. Only the figures the runs have data for are made:
// a speedup needs runs at several sizes, one of them 1 worker; a heat map, ranks that shared their
// step times; staleness, a parameter-server mode. Pure: runs in, SVG text out.
#pragma once

#include <string>
#include <vector>

#include "report/run_data.h"

namespace gyre::report {

struct Figure {
  std::string id;  // for the page's anchors and the PNG's name: [a-z0-9-]
  std::string title;
  std::string caption;
  std::string svg;
};

std::vector<Figure> figures(const std::vector<Run>& runs, const std::vector<BenchSeries>& bench);

// Running mean over `window` points ending at each point (the first ones over fewer).
std::vector<double> movingMean(const std::vector<double>& values, std::size_t window);

}  // namespace gyre::report
