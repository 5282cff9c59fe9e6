#include "plot/svg_frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "plot/svg_chart.h"

namespace gyre::plot::detail {

double Axis::map(double v, double from, double to) const {
  const double t =
      log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
  return from + t * (to - from);
}

bool Axis::usable(double v) const {
  return std::isfinite(v) && (!log || v > 0);
}

std::string tickText(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e5 || a < 1e-3) return fmt::format("{:.0e}", v);
  return fmt::format("{:g}", std::round(v * 1e6) / 1e6);
}

Axis fitAxis(const std::vector<double>& values, bool log, bool fromZero) {
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
  if (fromZero) lo = std::min(lo, 0.0);
  if (hi == lo) {
    lo -= std::abs(lo) > 0 ? std::abs(lo) * 0.1 : 1;
    hi += std::abs(hi) > 0 ? std::abs(hi) * 0.1 : 1;
    if (fromZero) lo = std::min(0.0, lo + (std::abs(lo) > 0 ? std::abs(lo) * 0.1 : 1));
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

Area areaOf(int width, int height) {
  return {kLeft, width - kRight, height - kBottom, kTop};
}

std::string open(int width, int height, const std::string& title, const Area& area) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">{3}</text>\n",
      width, height, (area.x0 + area.x1) / 2, escapeXml(title));
}

std::string frame(const Area& a, int height, const Axis& ax, const Axis& ay, const std::string& xLabel,
                  const std::string& yLabel, bool xTicks) {
  std::string s;
  if (xTicks && ax.hi > ax.lo)
    for (double t : ticksOf(ax)) {
      const double px = ax.map(t, a.x0, a.x1);
      s += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e5e5e5\"/>"
          "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#444\">{4}</text>\n",
          px, a.y0, a.y1, a.y0 + 16, tickText(t));
    }
  if (ay.hi > ay.lo)  // an empty axis (categories the caller labels) gets no ticks
    for (double t : ticksOf(ay)) {
      const double py = ay.map(t, a.y0, a.y1);
      s += fmt::format(
          "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e5e5e5\"/>"
          "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" fill=\"#444\">{5}</text>\n",
          a.x0, py, a.x1, a.x0 - 6, py + 4, tickText(t));
    }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
                   a.x0, a.y1, a.x1 - a.x0, a.y0 - a.y1);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (a.x0 + a.x1) / 2,
                   height - 14, escapeXml(xLabel));
  s += fmt::format(
      "<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}</text>\n",
      (a.y0 + a.y1) / 2, escapeXml(yLabel));
  return s;
}

std::string legendEntry(const Area& a, std::size_t row, const std::string& color, const std::string& label,
                        Swatch swatch) {
  const double ly = a.y1 + 8 + 18 * static_cast<double>(row);
  const std::string mark =
      swatch == Swatch::kBox
          ? fmt::format("<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"{}\"/>", a.x1 + 12, ly - 5,
                        color)
          : fmt::format(
                "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"3\"{4}/>",
                a.x1 + 12, ly, a.x1 + 30, color,
                swatch == Swatch::kDashed ? " stroke-dasharray=\"5 3\"" : "");
  return mark + fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", a.x1 + 36, ly + 4, escapeXml(label));
}

std::string noData(const Area& area) {
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data yet</text>\n",
                     (area.x0 + area.x1) / 2, (area.y0 + area.y1) / 2);
}

}  // namespace gyre::plot::detail
