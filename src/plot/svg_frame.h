// What every chart of gyre_plot draws the same way (internal to src/plot): an axis fitted to the
// values with "nice" ticks, and the frame around the plot area (title, grid, tick labels, axis
// labels) on a white <svg>.
#pragma once

#include <string>
#include <vector>

namespace gyre::plot::detail {

constexpr double kLeft = 70, kRight = 240, kTop = 40, kBottom = 55;  // margins; the legend is on the right

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v, double from, double to) const;
  bool usable(double v) const;
};

// An axis over the usable values, widened to round ticks (to powers of ten when log). With
// `fromZero`, a linear axis starts at 0 (bars).
Axis fitAxis(const std::vector<double>& values, bool log, bool fromZero = false);
std::vector<double> ticksOf(const Axis& a);
std::string tickText(double v);

// The plot area, in pixels: x0..x1 left to right, y0 (bottom) .. y1 (top).
struct Area {
  double x0, x1, y0, y1;
};
Area areaOf(int width, int height);

// "<svg ...><rect white/>" and the title.
std::string open(int width, int height, const std::string& title, const Area& area);
// Grid lines and tick labels of both axes (none for an axis with hi <= lo, nor for x when xTicks
// is false: the caller labels categories), the plot area's border and the axis labels.
std::string frame(const Area& area, int height, const Axis& ax, const Axis& ay, const std::string& xLabel,
                  const std::string& yLabel, bool xTicks = true);
// A legend entry at `row` to the right of the plot area: a swatch (a line, or a box) and the label.
enum class Swatch { kLine, kDashed, kBox };
std::string legendEntry(const Area& area, std::size_t row, const std::string& color, const std::string& label,
                        Swatch swatch = Swatch::kLine);

// "no data yet" in the middle of the plot area.
std::string noData(const Area& area);

}  // namespace gyre::plot::detail
