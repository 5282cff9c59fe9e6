// Charts as self-contained SVG: lines and points on linear or logarithmic axes, with "nice" ticks,
// axis labels, a title and a legend. No dependency beyond the standard library; a browser shows
// the text as it is, and an HTML page can inline it. Used by gyre tune's report (tune/plots.h) and
// gyre report (report/).
#pragma once

#include <string>
#include <vector>

namespace gyre::plot {

struct Series {
  std::string label;  // in the legend; empty: not listed
  std::vector<double> x, y;
  std::string color;    // empty: the palette's next
  bool line = true;     // join the points
  bool points = false;  // mark each point
  double width = 1.5;   // the line's
  double opacity = 1;
  bool dashed = false;  // a reference line (ideal, peer)
};

struct Chart {
  std::string title;
  std::string xLabel, yLabel;
  bool logX = false;
  bool logY = false;
  int width = 800;
  int height = 420;
  std::vector<Series> series;
};

// The chart as an <svg> element. Points that are not finite (or not positive on a log axis) are
// left out; a chart without any point says so in its middle.
std::string svg(const Chart& chart);

// Bars over categories (runs, staleness values): one bar of each stack's value per category,
// side by side, or piled up when `stacked` (the parts of a whole: a step's split).
struct BarStack {
  std::string label;           // in the legend
  std::vector<double> values;  // one per category
  std::string color;           // empty: the palette's next
};
struct BarChart {
  std::string title;
  std::string xLabel, yLabel;
  std::vector<std::string> categories;
  std::vector<BarStack> stacks;
  bool stacked = false;
  int width = 800;
  int height = 420;
};
std::string svg(const BarChart& chart);

// A heat map: values[row][column] as colours from pale yellow (low) to dark blue (high), rows
// labelled (ranks) top to bottom, columns placed at `columns` (steps) on the x axis; a colour bar
// on the right gives the scale in `unit`. Values that are not finite are left blank.
struct HeatMap {
  std::string title;
  std::string xLabel, yLabel, unit;
  std::vector<std::string> rows;
  std::vector<double> columns;
  std::vector<std::vector<double>> values;
  int width = 800;
  int height = 420;
};
std::string svg(const HeatMap& map);

// The palette: 10 colours that stay apart (Tableau 10).
const std::string& paletteColor(std::size_t i);

// Tick positions for [lo, hi]: about `target` round numbers (1, 2 or 5 x 10^k apart).
std::vector<double> niceTicks(double lo, double hi, int target = 6);

// Text for SVG or HTML: & < > " escaped.
std::string escapeXml(const std::string& text);

}  // namespace gyre::plot
