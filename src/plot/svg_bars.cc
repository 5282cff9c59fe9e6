// Bar charts and heat maps (svg_chart.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "plot/svg_chart.h"
#include "plot/svg_frame.h"

namespace gyre::plot {

std::string svg(const BarChart& chart) {
  using namespace detail;
  const std::size_t n = chart.categories.size();
  std::vector<double> tops;
  for (std::size_t c = 0; c < n; ++c) {
    double pile = 0;
    for (const BarStack& stack : chart.stacks) {
      const double v = c < stack.values.size() && std::isfinite(stack.values[c]) ? stack.values[c] : 0;
      if (chart.stacked) {
        pile += std::max(0.0, v);
      } else {
        tops.push_back(v);
      }
    }
    if (chart.stacked) tops.push_back(pile);
  }
  const Axis ay = fitAxis(tops, false, true);
  const Area area = areaOf(chart.width, chart.height);
  std::string s = open(chart.width, chart.height, chart.title, area);
  s += frame(area, chart.height, Axis{}, ay, chart.xLabel, chart.yLabel, false);
  if (n == 0 || chart.stacks.empty()) return s + noData(area) + "</svg>\n";
  const double slot = (area.x1 - area.x0) / static_cast<double>(n);
  const double groupWidth = slot * 0.7;
  const double barWidth = chart.stacked ? groupWidth : groupWidth / static_cast<double>(chart.stacks.size());
  // Category labels: every one when they fit, else every k-th.
  const std::size_t every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(45.0 / slot)));
  for (std::size_t c = 0; c < n; ++c) {
    const double cx = area.x0 + slot * (static_cast<double>(c) + 0.5);
    if (c % every == 0)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n", cx,
                       area.y0 + 16, escapeXml(chart.categories[c]));
    double pile = 0;
    for (std::size_t k = 0; k < chart.stacks.size(); ++k) {
      const BarStack& stack = chart.stacks[k];
      const double v = c < stack.values.size() && std::isfinite(stack.values[c]) ? stack.values[c] : 0;
      const double from = chart.stacked ? pile : 0;
      const double to = from + (chart.stacked ? std::max(0.0, v) : v);
      pile = to;
      const double yTop = ay.map(std::max(from, to), area.y0, area.y1);
      const double yBottom = ay.map(std::min(from, to), area.y0, area.y1);
      const double x =
          chart.stacked ? cx - groupWidth / 2 : cx - groupWidth / 2 + barWidth * static_cast<double>(k);
      const std::string color = stack.color.empty() ? paletteColor(k) : stack.color;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: "
          "{}</title></rect>\n",
          x, yTop, barWidth, std::max(0.0, yBottom - yTop), color, escapeXml(stack.label), tickText(v));
    }
  }
  for (std::size_t k = 0; k < chart.stacks.size(); ++k)
    if (!chart.stacks[k].label.empty())
      s += legendEntry(area, k, chart.stacks[k].color.empty() ? paletteColor(k) : chart.stacks[k].color,
                       chart.stacks[k].label, Swatch::kBox);
  return s + "</svg>\n";
}

namespace {

// Pale yellow to dark blue through green (a few stops of viridis, reversed so that high is dark).
std::string heatColor(double t) {
  static const double stops[][3] = {
      {253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  int rgb[3];
  for (int k = 0; k < 3; ++k)
    rgb[k] = static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

}  // namespace

std::string svg(const HeatMap& map) {
  using namespace detail;
  const Area area = areaOf(map.width, map.height);
  const Axis ax = fitAxis(map.columns, false);
  std::string s = open(map.width, map.height, map.title, area);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& row : map.values)
    for (double v : row)
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  // Rows as categories: the y axis is labelled by the caller's names, not ticks.
  s += frame(area, map.height, ax, Axis{0, 0, false}, map.xLabel, map.yLabel, true);
  const std::size_t rows = map.rows.size();
  if (rows == 0 || map.columns.empty() || !std::isfinite(lo)) return s + noData(area) + "</svg>\n";
  const double rowHeight = (area.y0 - area.y1) / static_cast<double>(rows);
  const double span = hi > lo ? hi - lo : 1;
  // Each cell reaches halfway to its neighbours.
  std::vector<double> edges(map.columns.size() + 1);
  for (std::size_t c = 0; c < map.columns.size(); ++c) {
    const double px = ax.map(map.columns[c], area.x0, area.x1);
    if (c + 1 < map.columns.size()) edges[c + 1] = (px + ax.map(map.columns[c + 1], area.x0, area.x1)) / 2;
    if (c == 0) edges[0] = area.x0;
  }
  // The last cell as wide as the one before it (or the whole area for a single column).
  const std::size_t last = map.columns.size();
  edges[last] = last > 1
                    ? std::min(area.x1, 2 * ax.map(map.columns[last - 1], area.x0, area.x1) - edges[last - 1])
                    : area.x1;
  if (last > 1) edges[0] = std::max(area.x0, 2 * ax.map(map.columns[0], area.x0, area.x1) - edges[1]);
  for (std::size_t r = 0; r < rows; ++r) {
    const double y = area.y1 + rowHeight * static_cast<double>(r);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n", area.x0 - 6,
                     y + rowHeight / 2 + 4, escapeXml(map.rows[r]));
    if (r >= map.values.size()) continue;
    s += "<g shape-rendering=\"crispEdges\">";
    for (std::size_t c = 0; c < map.columns.size() && c < map.values[r].size(); ++c) {
      const double v = map.values[r][c];
      if (!std::isfinite(v)) continue;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"/>",
                       edges[c], y, std::max(0.5, edges[c + 1] - edges[c]), rowHeight,
                       heatColor((v - lo) / span));
    }
    s += "</g>\n";
  }
  // The colour bar.
  const double bx = area.x1 + 20, top = area.y1 + 10, bottom = area.y0 - 10;
  constexpr int kSteps = 20;
  for (int i = 0; i < kSteps; ++i) {
    const double h = (bottom - top) / kSteps;
    s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"16\" height=\"{:.1f}\" fill=\"{}\"/>", bx,
                     top + h * i, h + 0.5, heatColor(1.0 - (i + 0.5) / kSteps));
  }
  s += fmt::format(
      "\n<text x=\"{0}\" y=\"{1}\">{2:.3g} {4}</text><text x=\"{0}\" y=\"{3}\">{5:.3g} {4}</text>\n", bx + 22,
      top + 10, hi, bottom, escapeXml(map.unit), lo);
  return s + "</svg>\n";
}

}  // namespace gyre::plot
