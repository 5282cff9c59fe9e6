// gyre report as a user runs it, and its page in a real browser: headless Chromium (Debian's
// package, through tests/browser/chromium.sh) opens the page written for runs at 1, 2 and 4
// workers, a parameter-server run and a collectives benchmark; the page logs nothing to the
// console, and each figure, rasterized by the browser, drew something (the page's self-check,
// read back from the DOM). Also: the PNGs, and the errors for a directory without a run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "support/report_runs.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

test::ProgramRun chromium(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/bash", test::sourceDir() + "/tests/browser/chromium.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::runProgram({argv, test::cleanEnvironment()}, test::kJobTimeout);
}

std::string attribute(const std::string& tag, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(tag, m, std::regex(name + "=\"([^\"]*)\""))) return "";
  return m[1];
}

TEST(ReportBrowser, ThePageRendersEveryFigureInChromiumWithoutConsoleErrors) {
  test::TempDir dir;
  const std::string d = dir.path();
  for (int w : {1, 2, 4})
    test::writeFakeRun(d + "/np" + std::to_string(w), {.world = w, .straggler = w == 4 ? 1 : -1});
  test::writeFakeRun(d + "/ps", {.world = 2, .parameterServer = true});
  std::ofstream(d + "/coll.jsonl")
      << "{\"op\":\"allreduce\",\"algo\":\"ring\",\"np\":2,\"dtype\":\"float32\",\"transport\":\"auto\","
         "\"bytes\":4096,\"busbw_GBps\":0.5,\"mpi_busbw_GBps\":0.9}\n"
      << "{\"op\":\"allreduce\",\"algo\":\"ring\",\"np\":2,\"dtype\":\"float32\",\"transport\":\"auto\","
         "\"bytes\":1048576,\"busbw_GBps\":4.5,\"mpi_busbw_GBps\":5.0}\n";
  const test::ProgramRun report =
      test::runProgram({{test::gyreTool(), "report", d + "/np1", d + "/np2", d + "/np4", d + "/ps", "--bench",
                         d + "/coll.jsonl", "-o", d + "/out/report.html"},
                        test::cleanEnvironment()},
                       test::kJobTimeout);
  ASSERT_EQ(report.exitCode, 0) << report.describe();
  // 4 loss/accuracy, throughput, step split, speedup, efficiency, 3 heat maps, staleness, busbw.
  EXPECT_NE(report.out.find("/out/report.html: 13 figures"), std::string::npos) << report.out;
  if (report.err.find("no PNGs") == std::string::npos) {
    for (const std::string id : {"speedup", "ranks-np4", "staleness-ps", "busbw"}) {
      const std::string png = test::readFile(d + "/out/report-" + id + ".png");
      EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n") << id;
      EXPECT_GT(png.size(), 5000u) << id;
    }
  } else {
    ADD_FAILURE() << "rsvg-convert (Debian's librsvg2-bin, from scripts/install-deps.sh) is missing: "
                  << report.err;
  }

  const test::ProgramRun dom = chromium({"dom", d + "/out/report.html"});
  if (dom.exitCode == 77) GTEST_SKIP() << "Chromium cannot be installed here: " << dom.err;
  ASSERT_EQ(dom.exitCode, 0) << dom.describe();
  std::istringstream log(dom.err);
  for (std::string line; std::getline(log, line);)
    EXPECT_EQ(line.find("CONSOLE"), std::string::npos) << "the page logged: " << line;
  std::smatch html;
  ASSERT_TRUE(std::regex_search(dom.out, html, std::regex("<html[^>]*>"))) << dom.out.substr(0, 500);
  EXPECT_EQ(attribute(html[0], "data-figures"), "13") << html[0];
  EXPECT_EQ(attribute(html[0], "data-rendered"), "13") << html[0];
  EXPECT_FALSE(attribute(html[0], "data-render-ms").empty()) << html[0];
  // Each figure covers a good part of its 800 x 420 pixels with something other than white.
  const std::regex figure("<figure class=\"plot\" id=\"([^\"]+)\" data-ink=\"([0-9]+)\"");
  int figures = 0;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), figure); it != std::sregex_iterator();
       ++it) {
    ++figures;
    EXPECT_GT(std::stoi((*it)[2]), 3000) << "figure " << (*it)[1] << " is nearly blank";
  }
  EXPECT_EQ(figures, 13);

  const test::ProgramRun shot =
      chromium({"screenshot", d + "/out/report.html", d + "/shot.png", "1200", "2000"});
  ASSERT_EQ(shot.exitCode, 0) << shot.describe();
  EXPECT_GT(test::readFile(d + "/shot.png").size(), 20000u);
}

TEST(ReportBrowser, ADirectoryWithoutARunIsAnErrorNamingTheFilesLookedFor) {
  test::TempDir dir;
  const test::ProgramRun run = test::runProgram(
      {{test::gyreTool(), "report", dir.path()}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_NE(
      run.err.find(dir.path() + ": holds no run of gyre train: looked for metrics.jsonl and steps.jsonl"),
      std::string::npos)
      << run.err;
  const test::ProgramRun none =
      test::runProgram({{test::gyreTool(), "report"}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(none.exitCode, 2) << none.describe();
  EXPECT_NE(none.err.find("give at least one run directory"), std::string::npos) << none.err;
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
