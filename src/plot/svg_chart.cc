#include "plot/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "plot/svg_frame.h"

namespace gyre::plot {

const std::string& paletteColor(std::size_t i) {
  static const std::vector<std::string> colors = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return colors[i % colors.size()];
}

std::vector<double> niceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 0.5; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
    if (ticks.back() >= hi) break;
  }
  return ticks;
}

std::string escapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg(const Chart& chart) {
  using namespace detail;
  std::vector<double> xs, ys;
  for (const Series& s : chart.series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  const Axis ax = fitAxis(xs, chart.logX), ay = fitAxis(ys, chart.logY);
  const Area area = areaOf(chart.width, chart.height);
  const double x0 = area.x0, x1 = area.x1, y0 = area.y0, y1 = area.y1;
  std::string s = open(chart.width, chart.height, chart.title, area);
  s += frame(area, chart.height, ax, ay, chart.xLabel, chart.yLabel);
  // The series.
  std::size_t legendRow = 0, drawn = 0;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const Series& series = chart.series[i];
    const std::string color = series.color.empty() ? paletteColor(i) : series.color;
    std::string path, dots;
    for (std::size_t k = 0; k < series.x.size() && k < series.y.size(); ++k) {
      if (!ax.usable(series.x[k]) || !ay.usable(series.y[k])) continue;
      const double px = ax.map(series.x[k], x0, x1), py = ay.map(series.y[k], y0, y1);
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px, py);
      if (series.points || series.x.size() == 1)
        dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"/>", px, py);
      ++drawn;
    }
    s += fmt::format("<g stroke=\"{0}\" fill=\"{0}\" opacity=\"{1}\">", color, series.opacity);
    if (series.line && !path.empty())
      s += fmt::format("<path d=\"{}\" fill=\"none\" stroke-width=\"{}\"{}/>", path, series.width,
                       series.dashed ? " stroke-dasharray=\"6 4\"" : "");
    s += dots + "</g>\n";
    if (!series.label.empty())
      s += legendEntry(area, legendRow++, color, series.label,
                       series.dashed ? Swatch::kDashed : Swatch::kLine);
  }
  if (drawn == 0) s += noData(area);
  return s + "</svg>\n";
}

}  // namespace gyre::plot
