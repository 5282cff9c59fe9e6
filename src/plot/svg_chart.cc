#include "plot/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gyre::plot {
namespace {

constexpr double kLeft = 70, kRight = 240, kTop = 40, kBottom = 55;  // margins; the legend is on the right

std::string tickText(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e5 || a < 1e-3) return fmt::format("{:.0e}", v);
  return fmt::format("{:g}", std::round(v * 1e6) / 1e6);
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v, double from, double to) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return from + t * (to - from);
  }
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

Axis fit(const std::vector<double>& values, bool log) {
  Axis a;
  a.log = log;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (a.usable(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (!std::isfinite(lo)) return a;
  if (log) {
    a.lo = std::pow(10, std::floor(std::log10(lo)));
    a.hi = std::pow(10, std::ceil(std::log10(hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
    return a;
  }
  if (hi == lo) {
    lo -= std::abs(lo) > 0 ? std::abs(lo) * 0.1 : 1;
    hi += std::abs(hi) > 0 ? std::abs(hi) * 0.1 : 1;
  }
  const std::vector<double> ticks = niceTicks(lo, hi);
  a.lo = std::min(lo, ticks.front());
  a.hi = std::max(hi, ticks.back());
  return a;
}

std::vector<double> ticksOf(const Axis& a) {
  if (!a.log) return niceTicks(a.lo, a.hi);
  std::vector<double> t;
  for (double v = a.lo; v <= a.hi * 1.0001; v *= 10) t.push_back(v);
  return t;
}

}  // namespace

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
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg(const Chart& chart) {
  std::vector<double> xs, ys;
  for (const Series& s : chart.series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  const Axis ax = fit(xs, chart.logX), ay = fit(ys, chart.logY);
  const double w = chart.width, h = chart.height;
  const double x0 = kLeft, x1 = w - kRight, y0 = h - kBottom, y1 = kTop;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      w, h);
  s += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
                   (x0 + x1) / 2, escapeXml(chart.title));
  // Grid and ticks.
  for (double t : ticksOf(ax)) {
    const double px = ax.map(t, x0, x1);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#444\">{4}</text>\n",
                     px, y0, y1, y0 + 16, tickText(t));
  }
  for (double t : ticksOf(ay)) {
    const double py = ay.map(t, y0, y1);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" fill=\"#444\">{5}</text>\n",
                     x0, py, x1, x0 - 6, py + 4, tickText(t));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", x0, y1,
                   x1 - x0, y0 - y1);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (x0 + x1) / 2, h - 14,
                   escapeXml(chart.xLabel));
  s += fmt::format("<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}</text>\n",
                   (y0 + y1) / 2, escapeXml(chart.yLabel));
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
      s += fmt::format("<path d=\"{}\" fill=\"none\" stroke-width=\"{}\"/>", path, series.width);
    s += dots + "</g>\n";
    if (series.label.empty()) continue;
    const double ly = y1 + 8 + 18 * static_cast<double>(legendRow++);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"3\"/>"
                     "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
                     x1 + 12, ly, x1 + 30, color, x1 + 36, ly + 4, escapeXml(series.label));
  }
  if (drawn == 0)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data yet</text>\n", (x0 + x1) / 2,
                     (y0 + y1) / 2);
  return s + "</svg>\n";
}

}  // namespace gyre::plot
