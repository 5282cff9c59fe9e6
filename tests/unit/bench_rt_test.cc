// `gyre bench rt`'s plan and report (bench/cli/bench_rt_plan.h, bench_rt_report.h): the names of
// its rows, the targets, the median of the rounds, the table and the JSON, without measuring
// anything (tests/process/bench_rt_test.cc runs the bench). Without the gyre tool
// (GYRE_BUILD_APPS, gyre_bench) this file has no tests.
#if __has_include("bench_rt_report.h")
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench_rt_plan.h"
#include "bench_rt_report.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

TEST(BenchRtPlan, RowNamesAndTheJobAcrossHosts) {
  EXPECT_EQ(rolloutRowName(1), "cartpole env steps, 1 actor");
  EXPECT_EQ(rolloutRowName(4), "cartpole env steps, 4 actors");
  EXPECT_EQ(readerWhere(1, true, true), "rank 1, this host");
  EXPECT_EQ(readerWhere(2, false, false), "rank 2, another host, fetched");
  EXPECT_EQ(readerWhere(3, false, true), "rank 3, another host, its copy");
  EXPECT_THROW(checkAcrossHostsJob(1), InvalidArgument);
  EXPECT_NO_THROW(checkAcrossHostsJob(2));
}

TEST(BenchRtReport, TargetsAreRaysAndHalfOfMemcpy) {
  std::vector<RtRow> rows = {{"single client tasks sync", "in process", 1},
                             {"single client tasks async", "over loopback TCP", 1},
                             {"1:1 actor calls sync", "in process", 1},
                             {"1:1 actor calls async", "in process", 1},
                             {"memcpy 100 MB", "in process", 12},
                             {"get 100 MB", "in process", 3},
                             {"put 100 MB (shared memory)", "in process", 5},
                             {"get 100 MB (shared memory)", "another process, mapped", 5}};
  setRtTargets(rows);
  const std::vector<double> targets = {20000, 100000, 20000, 0, 0, 0, 6, 6};
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].target, targets[i]) << rows[i].name;
  // Across hosts there is no memcpy row to halve.
  std::vector<RtRow> across = {{"put 100 MB (shared memory)", "rank 0", 2}};
  setRtTargets(across);
  EXPECT_EQ(across[0].target, 0);
}

TEST(BenchRtReport, RowsReportTheirMedianRound) {
  const std::vector<RtRow> first = {{"a", "x", 3, 10}, {"b", "y", 1}};
  const std::vector<RtRow> second = {{"a", "x", 1, 99}, {"b", "y", 2}};
  const std::vector<RtRow> third = {{"a", "x", 2}, {"b", "y", 5}};
  const std::vector<RtRow> rows = medianOfRounds({first, second, third});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].perSecond, 2);
  EXPECT_EQ(rows[0].target, 10);  // the first round's
  EXPECT_EQ(rows[1].perSecond, 2);
  EXPECT_EQ(medianOfRounds({first, second})[0].perSecond, 3);  // of two, the higher
  EXPECT_EQ(medianOfRounds({first})[1].perSecond, 1);
}

TEST(BenchRtReport, TableAndJson) {
  RtBenchSettings s;
  s.seconds = 0.5;
  s.repeat = 3;
  const RtRow sync{"single client tasks sync", "in process", 25000, 20000};
  RtRow get{"get 100 MB (shared memory)", "rank 2, another host, fetched", 1.5};
  get.receivedMb = 104.9;
  const RtRow rollouts{"cartpole env steps, 2 actors", "2 processes", 40000, 0, 2};
  const std::string table = rtTable(s, {sync, get, rollouts}, 8);
  EXPECT_EQ(
      table.rfind("gyre bench rt: 0.5 s per row, median of 3 round(s), 2 threads per process, 8 hardware "
                  "threads\nbenchmark ",
                  0),
      0u)
      << table;
  EXPECT_NE(table.find(" 25000  PASS 20000\n"), std::string::npos) << table;
  EXPECT_NE(table.find(" 1.50 GB  its host received 104.9 MB\n"), std::string::npos) << table;
  EXPECT_NE(table.find(" 40000  \n"), std::string::npos) << table;
  const nlohmann::json j = rtRowJson(sync, s, 8);
  EXPECT_EQ(j["benchmark"], "single client tasks sync");
  EXPECT_EQ(j["target_per_s"], 20000.0);
  EXPECT_EQ(j["threads"], 2);  // --threads
  EXPECT_TRUE(j["received_mb"].is_null());
  EXPECT_EQ(j["repeat"], 3);
  EXPECT_EQ(j["hardware_threads"], 8);
  EXPECT_EQ(rtRowJson(rollouts, s, 8)["threads"], 2);  // as many as actors
  EXPECT_TRUE(rtRowJson(rollouts, s, 8)["target_per_s"].is_null());
  EXPECT_DOUBLE_EQ(rtRowJson(get, s, 8)["received_mb"].get<double>(), 104.9);
}

}  // namespace
}  // namespace gyre::app
#endif
