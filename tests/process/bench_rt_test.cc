// `gyre bench rt`: every row of Ray's microbenchmark set is measured and reported (figures are not
// checked here: they belong to the benchmark, not to a test), and a bad flag is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

TEST(BenchRt, MeasuresEveryRowAndPrintsJson) {
  const test::ProgramRun r =
      test::runProgram({{test::gyreTool(), "bench", "rt", "--seconds", "0.1", "--threads", "1", "--json"},
                        test::cleanEnvironment()},
                       test::kJobTimeout);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  std::istringstream in(r.out);
  std::set<std::pair<std::string, std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_GT(j.at("per_s").get<double>(), 0) << line;
    if (j.at("where") != "2 processes") {
      EXPECT_EQ(j.at("threads"), 1) << line;
    }
    rows.insert({j.at("benchmark").get<std::string>(), j.at("where").get<std::string>()});
  }
  EXPECT_EQ(rows.size(), 19u) << r.out;
  for (const char* where : {"in process", "over loopback TCP"})
    for (const char* name : {"single client tasks sync", "single client tasks async", "1:1 actor calls sync",
                             "1:1 actor calls async"})
      EXPECT_EQ(rows.count({name, where}), 1u) << name << ", " << where;
  EXPECT_EQ(rows.count({"n:n actor calls async (n=2)", "over loopback TCP"}), 1u);
  for (const auto& row : std::vector<std::pair<std::string, std::string>>{{"memcpy 100 MB", "in process"},
                                                                           {"put 100 MB", "in process"},
                                                                           {"get 100 MB", "in process"},
                                                                           {"get 100 MB", "over loopback TCP"},
                                                                           {"put 100 MB (shared memory)", "in process"},
                                                                           {"get 100 MB (shared memory)", "in process"},
                                                                           {"get 100 MB (shared memory)", "another process, mapped"}})
    EXPECT_EQ(rows.count(row), 1u) << row.first << ", " << row.second;
  for (const char* name : {"cartpole env steps, 1 actor", "cartpole env steps, 2 actors", "cartpole env steps, 4 actors"})
    EXPECT_EQ(rows.count({name, "2 processes"}), 1u) << name;
}

// --across-hosts runs as the ranks of a launched job; on one host every reader maps the owner's
// file (tests/netns checks the rows of other hosts). Alone it says what it needs.
TEST(BenchRt, AcrossHostsReadsOneObjectFromEveryRank) {
  const test::ProgramRun r = test::runProgram({{test::gyreTool(), "run", "-np", "3", "--no-tag-output", "--",
                                                test::gyreTool(), "bench", "rt", "--across-hosts", "--json"},
                                               test::cleanEnvironment()},
                                              test::kJobTimeout);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  std::istringstream in(r.out);
  std::set<std::string> where;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("{")) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_GT(j.at("per_s").get<double>(), 0) << line;
    where.insert(j.at("where").get<std::string>());
  }
  EXPECT_EQ(where, (std::set<std::string>{"rank 0", "rank 1, this host", "rank 2, this host"})) << r.out;
  const test::ProgramRun alone = test::runProgram(
      {{test::gyreTool(), "bench", "rt", "--across-hosts"}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(alone.exitCode, 1) << alone.describe();
  EXPECT_NE(alone.err.find("runs as the ranks of a job of 2 or more"), std::string::npos) << alone.err;
}

TEST(BenchRt, RefusesABadFlag) {
  const test::ProgramRun r = test::runProgram(
      {{test::gyreTool(), "bench", "rt", "--threads", "0"}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
