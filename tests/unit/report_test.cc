// gyre report's pieces without a browser: reading run directories (and what it says of ones that
// are not), the scaling figures and Amdahl's fit, which figures a set of runs gets, and the page.
// The page in a real browser: tests/process/report_browser_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "gyre/errors.h"
#include "report/figures.h"
#include "report/page.h"
#include "report/run_data.h"
#include "report/scaling.h"
#include "support/ranks.h"
#include "support/report_runs.h"

namespace gyre::report {
namespace {

std::set<std::string> ids(const std::vector<Figure>& figures) {
  std::set<std::string> out;
  for (const Figure& f : figures) out.insert(f.id);
  return out;
}

std::string messageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReportScaling, RecoversAmdahlsSerialFraction) {
  std::vector<std::pair<int, double>> throughputs;
  for (int w : {1, 2, 4, 8}) throughputs.emplace_back(w, 500 * amdahl(0.12, w));
  throughputs.emplace_back(2, 1.0);  // a slower repeat of a size: the best one counts
  const auto s = scaling(throughputs);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->points.size(), 4u);
  EXPECT_DOUBLE_EQ(s->points[0].speedup, 1.0);
  EXPECT_NEAR(s->points[2].speedup, amdahl(0.12, 4), 1e-9);
  EXPECT_NEAR(s->points[3].efficiency, amdahl(0.12, 8) / 8, 1e-9);
  ASSERT_TRUE(s->serialFraction.has_value());
  EXPECT_NEAR(*s->serialFraction, 0.12, 1e-9);
  // Speedup needs the 1-worker throughput; a run that slows down fits a serial fraction of 1.
  EXPECT_FALSE(scaling({{2, 100}, {4, 150}}).has_value());
  EXPECT_DOUBLE_EQ(*scaling({{1, 100}, {2, 60}})->serialFraction, 1.0);
  EXPECT_FALSE(scaling({{1, 100}})->serialFraction.has_value());
}

TEST(ReportScaling, MovingMeanSkipsGaps) {
  const std::vector<double> m = movingMean({1, 3, std::nan(""), 5, 7}, 2);
  EXPECT_DOUBLE_EQ(m[0], 1);
  EXPECT_DOUBLE_EQ(m[1], 2);
  EXPECT_DOUBLE_EQ(m[2], 3);
  EXPECT_DOUBLE_EQ(m[3], 5);
  EXPECT_DOUBLE_EQ(m[4], 6);
}

TEST(ReportRuns, ReadsEveryRecordOfARunDirectory) {
  test::TempDir dir;
  test::writeFakeRun(dir.path() + "/run", {.world = 4, .straggler = 2});
  // A restart logs steps 99 and 100 again (its times win), and a killed writer's last line is cut.
  std::ofstream(dir.path() + "/run/progress.jsonl", std::ios::app)
      << "{\"generation\":1,\"start_step\":98}\n{\"generation\":1,\"step\":99,\"time\":1900000000.5}\n"
      << "{\"generation\":1,\"step\":100,\"ti";
  const report::Run r = loadRun(dir.path() + "/run");
  EXPECT_EQ(r.name, "run");
  EXPECT_EQ(r.world, 4);
  EXPECT_EQ(r.model, "mlp");
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_NEAR(r.epochs[1].testAccuracy.value(), 0.8, 1e-9);
  EXPECT_NEAR(r.epochs[0].samplesPerS, 1000 * amdahl(0.1, 4), 1e-6);
  ASSERT_EQ(r.stepNumbers.size(), 100u);
  ASSERT_EQ(r.stepTimes.size(), 100u);
  EXPECT_DOUBLE_EQ(r.stepTimes[98].time, 1900000000.5);
  EXPECT_TRUE(r.stepTimes[98].rankMs.empty());
  EXPECT_EQ(r.stepTimes[0].rankMs, (std::vector<double>{10, 10, 30, 10}));
}

TEST(ReportRuns, SaysWhatItLookedForInADirectoryWithoutARun) {
  test::TempDir dir;
  EXPECT_NE(messageOf([&] {
              loadRun(dir.path());
            }).find(": holds no run of gyre train: looked for metrics.jsonl and steps.jsonl"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { loadRun(dir.path() + "/nothing"); }).find("/nothing: not a directory"),
            std::string::npos);
  std::ofstream(dir.path() + "/steps.jsonl") << "{\"step\":1}\n[1,2]\n{\"step\":3}\n";
  EXPECT_NE(messageOf([&] { loadRun(dir.path()); }).find("steps.jsonl:2: not a JSON object"),
            std::string::npos);
  std::ofstream(dir.path() + "/bench.jsonl") << "{\"x\":1}\n";
  EXPECT_NE(messageOf([&] {
              loadBench(dir.path() + "/bench.jsonl");
            }).find("no line of `gyre bench collectives --json`"),
            std::string::npos);
}

TEST(ReportFigures, RunsAtSeveralSizesGetSpeedupEfficiencyAndAHeatMapEach) {
  test::TempDir dir;
  std::vector<report::Run> runs;
  for (int w : {1, 2, 4}) {
    test::writeFakeRun(dir.path() + "/np" + std::to_string(w), {.world = w, .straggler = w == 4 ? 3 : -1});
    runs.push_back(loadRun(dir.path() + "/np" + std::to_string(w)));
  }
  const std::vector<Figure> figures = report::figures(runs, {});
  EXPECT_EQ(ids(figures), (std::set<std::string>{"loss-steps", "loss-seconds", "accuracy-steps",
                                                 "accuracy-seconds", "throughput", "step-split", "speedup",
                                                 "efficiency", "ranks-np2", "ranks-np4"}));
  for (const Figure& f : figures) {
    if (f.id != "speedup") continue;
    EXPECT_NE(f.caption.find("serial fraction of 10.0%"), std::string::npos) << f.caption;
    EXPECT_NE(f.svg.find("Amdahl, serial 10.0%"), std::string::npos);
  }
  // One run: no scaling figures; without a 1-worker run neither.
  EXPECT_FALSE(ids(report::figures({runs[2]}, {})).contains("speedup"));
  EXPECT_FALSE(ids(report::figures({runs[1], runs[2]}, {})).contains("speedup"));
}

TEST(ReportFigures, ParameterServerRunsGetStalenessAndBenchOutputGetsBandwidth) {
  test::TempDir dir;
  test::writeFakeRun(dir.path() + "/ps", {.world = 2, .parameterServer = true});
  std::ofstream(dir.path() + "/coll.jsonl")
      << "{\"op\":\"allreduce\",\"algo\":\"ring\",\"np\":2,\"dtype\":\"float32\",\"transport\":\"auto\","
         "\"bytes\":4096,\"busbw_GBps\":0.5,\"mpi_busbw_GBps\":0.9}\n"
      << "{\"op\":\"allreduce\",\"algo\":\"ring\",\"np\":2,\"dtype\":\"float32\",\"transport\":\"auto\","
         "\"bytes\":65536,\"busbw_GBps\":2.5,\"mpi_busbw_GBps\":3.0}\n";
  const std::vector<BenchSeries> bench = loadBench(dir.path() + "/coll.jsonl");
  ASSERT_EQ(bench.size(), 1u);
  EXPECT_EQ(bench[0].label, "allreduce ring, 2 ranks, float32, auto");
  ASSERT_EQ(bench[0].points.size(), 2u);
  const std::vector<Figure> figures = report::figures({loadRun(dir.path() + "/ps")}, bench);
  EXPECT_TRUE(ids(figures).contains("staleness-ps"));
  EXPECT_TRUE(ids(figures).contains("busbw"));
  for (const Figure& f : figures)
    if (f.id == "busbw") {
      EXPECT_NE(f.svg.find("OpenMPI allreduce ring"), std::string::npos);
    }
}

TEST(ReportPage, IsSelfContainedWithUniqueIdsAndEscapedNames) {
  test::TempDir dir;
  test::writeFakeRun(dir.path() + "/a<b>&c", {.world = 2});
  const report::Run r = loadRun(dir.path() + "/a<b>&c");
  const std::string html = page("title <x>", {r, r}, report::figures({r, r}, {}));
  EXPECT_NE(html.find("<h1>title &lt;x&gt;</h1>"), std::string::npos);
  EXPECT_NE(html.find("id=\"ranks-a-b-c\""), std::string::npos);
  EXPECT_NE(html.find("id=\"ranks-a-b-c-2\""), std::string::npos);
  EXPECT_EQ(html.find("a<b>"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("html.dataset.rendered = rendered"), std::string::npos);
}

}  // namespace
}  // namespace gyre::report
