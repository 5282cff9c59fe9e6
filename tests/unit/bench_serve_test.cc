// gyre bench serve's plan and report (bench/cli/bench_serve_plan.h): the configurations, when a
// load counts as sustained, and the figures each configuration is given. Without the gyre tool
// (GYRE_BUILD_APPS, gyre_bench) this file has no tests.
#if __has_include("bench_serve_plan.h")
#include <gtest/gtest.h>

#include "bench_serve_plan.h"
#include "bench_serve_step.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

ServeRow row(const std::string& config, double rate, double perS, double p99, int errors = 0) {
  ServeRow r;
  r.config = config;
  r.rate = rate;
  r.requests = 100;
  r.requestsPerS = perS;
  r.p99Ms = p99;
  r.errors = errors;
  return r;
}

TEST(BenchServe, TheBaselineRunsOneRequestPerForwardPassBesideTheBatchedServer) {
  ServeBenchSettings s;
  s.maxBatchSize = 16;
  s.batchWaitMs = 2.5;
  s.replicas = 2;
  const std::vector<ServeConfig> c = planServeConfigs(s);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "baseline");
  EXPECT_EQ(c[0].flags,
            (std::vector<std::string>{"--max-batch-size", "1", "--replicas", "1", "--max-connections", "72"}));
  EXPECT_EQ(c[1].flags, (std::vector<std::string>{"--max-batch-size", "16", "--batch-wait-ms", "2.5", "--replicas",
                                                  "2", "--max-connections", "72"}));
  s.baselineReplicas = 2;  // a baseline of as many replicas, for a like-for-like ratio
  EXPECT_EQ(planServeConfigs(s)[0].flags,
            (std::vector<std::string>{"--max-batch-size", "1", "--replicas", "2", "--max-connections", "72"}));
}

TEST(BenchServe, ALoadIsSustainedWithoutErrorsWithinTheBoundAndNearItsRate) {
  EXPECT_TRUE(keptUp(row("b", 400, 390, 20), 50));
  EXPECT_FALSE(keptUp(row("b", 400, 300, 20), 50));     // fell behind the offered rate
  EXPECT_FALSE(keptUp(row("b", 400, 400, 60), 50));     // p99 past the bound
  EXPECT_FALSE(keptUp(row("b", 400, 400, 20, 1), 50));  // an error
  EXPECT_TRUE(keptUp(row("b", 0, 5000, 20), 50));       // closed loop: no rate to keep
  const std::vector<ServeRow> rows = {row("baseline", 100, 99, 5), row("baseline", 200, 150, 80),
                                      row("batched", 100, 100, 5), row("batched", 800, 790, 30),
                                      row("batched", 1600, 1000, 300)};
  EXPECT_EQ(bestWithinBound(rows, "baseline", 50), 99);
  EXPECT_EQ(bestWithinBound(rows, "batched", 50), 790);
  const nlohmann::json summary = serveSummaryJson(rows, ServeBenchSettings{});
  EXPECT_NEAR(summary["ratio"].get<double>(), 790.0 / 99, 1e-9);
  EXPECT_TRUE(summary["pass"].get<bool>());
}

TEST(BenchServe, PercentilesAreByNearestRank) {
  EXPECT_EQ(percentile({}, 0.5), 0);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 0.5), 3);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 0.99), 5);
  EXPECT_EQ(percentile({5, 1, 3, 2, 4}, 0), 1);
}

TEST(BenchServe, BadSettingsAreRefusedNamingTheFlag) {
  auto refused = [](auto change) {
    ServeBenchSettings s;
    change(s);
    try {
      validate(s);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused([](ServeBenchSettings& s) { s.format = "xml"; }).find("--format"), std::string::npos);
  EXPECT_NE(refused([](ServeBenchSettings& s) { s.rates = {0}; }).find("--rates"), std::string::npos);
  EXPECT_NE(refused([](ServeBenchSettings& s) { s.maxBatchSize = 1; }).find("--max-batch-size"), std::string::npos);
  EXPECT_NE(refused([](ServeBenchSettings& s) { s.seconds = 0; }).find("--seconds"), std::string::npos);
  EXPECT_EQ(refused([](ServeBenchSettings&) {}), "accepted");
}

// The step's timeline: per second, the phase's rate, the answers due in it and their p99, the
// replicas seen; the verdict's times from the step up and down.
TEST(BenchServeStep, WindowsAndTheTimesTheTargetsAsk) {
  std::vector<StepPhase> phases(3);
  phases[0] = {10, 0, 2, {0.1, 1.5}, {5, 6}, 0};
  phases[1] = {100, 2, 4, {2.1, 2.2, 3.5, 4.5, 5.5}, {300, 400, 90, 20, 30}, 1};
  phases[2] = {10, 6, 4, {6.5, 9.5}, {4, 5}, 0};
  const std::vector<ReplicaSample> replicas = {{1, 1}, {2.5, 1}, {3.4, 2}, {6.2, 2}, {8.7, 1}, {9.6, 1}};
  const std::vector<StepWindow> w = stepWindows(phases, replicas);
  ASSERT_EQ(w.size(), 10u);
  EXPECT_EQ(w[0].offered, 10);
  EXPECT_EQ(w[2].offered, 100);
  EXPECT_EQ(w[6].offered, 10);
  EXPECT_EQ(w[2].answered, 2);
  EXPECT_EQ(w[2].p99Ms, 400);
  EXPECT_EQ(w[3].replicas, 2);
  const StepVerdict v = stepVerdict(phases, replicas, 1, 2, 100);
  EXPECT_DOUBLE_EQ(v.upReplicasS, 1.4);
  EXPECT_DOUBLE_EQ(v.upP99S, 1.0);  // window 2 (p99 400 ms) is over the bound; 3, 4, 5 within
  EXPECT_DOUBLE_EQ(v.downReplicasS, 2.7);
  EXPECT_EQ(v.errors, 1);
  EXPECT_NE(stepText(w, v, 100).find("up: 2 replicas after 1.4 s, p99 within the bound from 1.0 s  PASS"),
            std::string::npos)
      << stepText(w, v, 100);
  EXPECT_EQ(stepJson(w, v, 100).at("summary").at("down"), "pass");
}

}  // namespace
}  // namespace gyre::app
#endif
