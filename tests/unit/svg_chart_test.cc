// The SVG charts of gyre tune's report: ticks, axes, escaping, and charts without data.
#include "plot/svg_chart.h"

#include <gtest/gtest.h>

namespace gyre::plot {
namespace {

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(SvgChart, TicksAreRoundNumbersCoveringTheRange) {
  EXPECT_EQ(niceTicks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(niceTicks(0, 9), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(niceTicks(0.71, 0.89).front(), 0.7000000000000001);
  EXPECT_EQ(niceTicks(3, 3), (std::vector<double>{3}));
}

TEST(SvgChart, DrawsEverySeriesWithItsLegendAndEscapesText) {
  Chart c;
  c.title = "a < b & \"c\"";
  c.xLabel = "iteration";
  c.yLabel = "accuracy";
  c.series.push_back({"trial 0", {1, 2, 3}, {0.5, 0.6, 0.7}, "", true, true});
  c.series.push_back({"", {1, 2}, {0.4, 0.45}, "#b8b8b8", true, false});
  const std::string s = svg(c);
  EXPECT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  EXPECT_NE(s.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(count(s, "<path "), 2);
  EXPECT_EQ(count(s, "<circle "), 3);  // the points of the first series only
  EXPECT_EQ(count(s, ">trial 0</text>"), 1);
  EXPECT_EQ(s.find("no data yet"), std::string::npos);
}

TEST(SvgChart, LogAxesDropPointsTheyCannotShowAndAnEmptyChartSaysSo) {
  Chart c;
  c.logX = true;
  c.series.push_back({"", {0.001, 0, -1, 0.1}, {1, 2, 3, 4}, "", false, true});
  const std::string s = svg(c);
  EXPECT_EQ(count(s, "<circle "), 2);
  EXPECT_NE(s.find(">0.001</text>"), std::string::npos);
  EXPECT_NE(s.find(">0.1</text>"), std::string::npos);
  Chart empty;
  empty.series.push_back({"", {}, {}, "", true, false});
  EXPECT_NE(svg(empty).find("no data yet"), std::string::npos);
}

}  // namespace
}  // namespace gyre::plot
