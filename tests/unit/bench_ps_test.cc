// `gyre bench ps`'s settings, plan, figures and report (bench/cli/bench_ps_plan.h,
// bench_ps_report.h), without running anything. The gyre tool's sources are only on the include
// path when it is built (GYRE_BUILD_APPS, gyre_bench); without it this file has no tests.
#if __has_include("bench_ps_plan.h")
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "bench_lists.h"
#include "bench_ps_plan.h"
#include "bench_ps_report.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

TEST(BenchPsParse, Part) {
  EXPECT_EQ(parsePsBenchPart("throughput"), PsBenchPart::kThroughput);
  EXPECT_EQ(parsePsBenchPart("accuracy"), PsBenchPart::kAccuracy);
  EXPECT_EQ(parsePsBenchPart("all"), PsBenchPart::kAll);
  EXPECT_THROW(parsePsBenchPart("both"), InvalidArgument);
  EXPECT_TRUE(runsThroughput(PsBenchPart::kAll) && runsAccuracy(PsBenchPart::kAll));
  EXPECT_FALSE(runsAccuracy(PsBenchPart::kThroughput));
  EXPECT_FALSE(runsThroughput(PsBenchPart::kAccuracy));
}

TEST(BenchPsParse, CountList) {
  EXPECT_EQ(parseCountList("1,2,4", "--servers"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parseCountList("3", "--servers"), (std::vector<int>{3}));
  for (const char* bad : {"", "0", "1,,2", "1,2,", "x", "2 ", "-1", "65", "1,1", "1.5"})
    EXPECT_THROW(parseCountList(bad, "--servers"), InvalidArgument) << bad;
  try {
    parseCountList("1,1", "--servers");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--servers"), std::string::npos) << e.what();
  }
}

TEST(BenchPsParse, SizeWithSuffix) {
  EXPECT_EQ(parseSizeWithSuffix("4M", "--floats"), 4u << 20);
  EXPECT_EQ(parseSizeWithSuffix("512k", "--floats"), 512u << 10);
  EXPECT_EQ(parseSizeWithSuffix("1000", "--floats"), 1000u);
  EXPECT_EQ(parseSizeWithSuffix("1G", "--floats"), 1u << 30);
  for (const char* bad : {"", "M", "4MB", "-4", "4.5M", " 4", "99999999999999999"})
    EXPECT_THROW(parseSizeWithSuffix(bad, "--floats"), InvalidArgument) << bad;
}

TEST(BenchPsParse, ThroughputValidation) {
  ThroughputSettings s;
  EXPECT_NO_THROW(validate(s));
  auto broken = [&](auto change) {
    ThroughputSettings t;
    change(t);
    EXPECT_THROW(validate(t), InvalidArgument);
  };
  broken([](ThroughputSettings& t) { t.mode = "fast"; });
  broken([](ThroughputSettings& t) { t.workers = 0; });
  broken([](ThroughputSettings& t) { t.floats = 10; });
  broken([](ThroughputSettings& t) { t.seconds = 0; });
  broken([](ThroughputSettings& t) { t.warmup = -1; });
  broken([](ThroughputSettings& t) { t.servers.clear(); });
  ThroughputSettings steps;
  steps.seconds = 0;
  steps.steps = 10;  // --steps replaces --seconds
  EXPECT_NO_THROW(validate(steps));
  steps.mode = "ssp:3";
  EXPECT_NO_THROW(validate(steps));
}

TEST(BenchPsPlan, KeySizesAreUnevenAndSumExactly) {
  for (std::uint64_t total : {64ull, 65ull, 100ull, 1000ull, 4ull << 20, (4ull << 20) + 7, 12345677ull}) {
    const std::vector<std::size_t> sizes = throughputKeySizes(total);
    ASSERT_EQ(sizes.size(), 7u) << total;
    EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}), total) << total;
    for (std::size_t size : sizes) EXPECT_GE(size, 1u) << total;
    EXPECT_GT(sizes[0], sizes[1]);
    EXPECT_GT(sizes[1], sizes[2]);
  }
  const auto big = throughputKeySizes(4u << 20);
  EXPECT_NEAR(static_cast<double>(big[0]) / (4u << 20), 0.40, 1e-6);
  EXPECT_LT(big.back(), 8u);  // the remainder: a bias-sized key
  EXPECT_THROW(throughputKeySizes(63), InvalidArgument);
}

TEST(BenchPsParse, TrainModes) {
  EXPECT_EQ(parseTrainModes("allreduce,ps:bsp,ps:asp,ps:ssp:2"),
            (std::vector<std::string>{"allreduce", "ps:bsp", "ps:asp", "ps:ssp:2"}));
  EXPECT_EQ(parseTrainModes("ps:ssp:0"), (std::vector<std::string>{"ps:ssp:0"}));
  for (const char* bad :
       {"", "ps", "ps:", "bsp", "ps:ssp", "ps:ssp:-1", "ps:ssp:x", "allreduce,allreduce", "ps:asp,", "ddp"})
    EXPECT_THROW(parseTrainModes(bad), InvalidArgument) << bad;
  EXPECT_TRUE(isPsMode("ps:asp"));
  EXPECT_FALSE(isPsMode("allreduce"));
}

TEST(BenchPsPlan, AccuracyValidation) {
  AccuracySettings s;
  EXPECT_NO_THROW(validate(s));
  auto broken = [&](auto change) {
    AccuracySettings t;
    change(t);
    EXPECT_THROW(validate(t), InvalidArgument);
  };
  broken([](AccuracySettings& t) { t.target = 0; });
  broken([](AccuracySettings& t) { t.target = 1.5; });
  broken([](AccuracySettings& t) { t.stragglerRank = 2; });  // of 2 workers
  broken([](AccuracySettings& t) { t.stragglerFactor = 0.5; });
  broken([](AccuracySettings& t) { t.batch = 127; });
  broken([](AccuracySettings& t) { t.evalEvery = 0; });
  broken([](AccuracySettings& t) { t.runTimeoutS = 0; });
  broken([](AccuracySettings& t) { t.model = "resnet"; });
  broken([](AccuracySettings& t) { t.modes.clear(); });
  AccuracySettings noStraggler;
  noStraggler.stragglerFactor = 1;
  noStraggler.stragglerRank = 7;  // unused without straggler runs
  EXPECT_NO_THROW(validate(noStraggler));
}

TEST(BenchPsPlan, RunsAndTheirCommandLines) {
  AccuracySettings s;
  const std::vector<AccuracyRun> runs = planAccuracyRuns(s);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0].label(), "allreduce");
  EXPECT_FALSE(runs[3].straggler);
  EXPECT_TRUE(runs[4].straggler);
  EXPECT_EQ(runs[7].label(), "ps:ssp:2 straggler");
  EXPECT_EQ(runs[7].dirName(), "ps-ssp-2-straggler");

  auto has = [](const std::vector<std::string>& args, const std::string& flag, const std::string& value) {
    const auto it = std::find(args.begin(), args.end(), flag);
    return it != args.end() && it + 1 != args.end() && *(it + 1) == value;
  };
  const std::vector<std::string> allreduce = trainArguments(s, runs[0], "/tmp/r");
  EXPECT_EQ(allreduce.front(), "train");
  EXPECT_EQ(std::count(allreduce.begin(), allreduce.end(), "--mode"), 0);  // gyre train's default, allreduce
  EXPECT_TRUE(has(allreduce, "--run-dir", "/tmp/r"));
  EXPECT_TRUE(has(allreduce, "--eval-every", "50"));
  EXPECT_TRUE(has(allreduce, "--progress", "off"));
  EXPECT_TRUE(has(allreduce, "--np", "2"));
  EXPECT_EQ(std::count(allreduce.begin(), allreduce.end(), "--servers"), 0);
  EXPECT_EQ(std::count(allreduce.begin(), allreduce.end(), "--straggler-factor"), 0);
  EXPECT_EQ(std::count(allreduce.begin(), allreduce.end(), "--lr"), 0);  // gyre train's default

  s.lr = 0.1;
  const std::vector<std::string> slow = trainArguments(s, runs[6], "/tmp/s");
  EXPECT_TRUE(has(slow, "--mode", "ps:asp"));
  EXPECT_TRUE(has(slow, "--servers", "2"));
  EXPECT_TRUE(has(slow, "--straggler-rank", "1"));
  EXPECT_TRUE(has(slow, "--straggler-factor", "2"));
  EXPECT_TRUE(has(slow, "--lr", "0.1"));

  s.stragglerFactor = 1;
  EXPECT_EQ(planAccuracyRuns(s).size(), 4u);
}

TEST(BenchPsFigures, EvalLinesAndTimeToAccuracy) {
  EXPECT_FALSE(parseEvalLine("").has_value());
  EXPECT_FALSE(parseEvalLine("  ").has_value());
  const std::optional<EvalPoint> p = parseEvalLine(R"({"step": 50, "time_s": 3.5, "test_acc": 0.81})");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->step, 50);
  EXPECT_DOUBLE_EQ(p->timeS, 3.5);
  EXPECT_DOUBLE_EQ(p->testAccuracy, 0.81);
  for (const char* bad :
       {"{", "[1]", R"({"step": 1, "time_s": 2})", R"({"step": 1, "time_s": "x", "test_acc": 1})"})
    EXPECT_THROW(parseEvalLine(bad), Error) << bad;

  const std::vector<EvalPoint> points = {
      {50, 4, 0.70}, {100, 8, 0.84}, {150, 12, 0.86}, {200, 16, 0.85}, {250, 20, 0.88}};
  const TimeToAccuracy t = timeToAccuracy(points, 0.85);
  EXPECT_TRUE(t.reached);
  EXPECT_EQ(t.step, 150);
  EXPECT_DOUBLE_EQ(t.timeS, 12);
  EXPECT_DOUBLE_EQ(t.bestAcc, 0.88);
  EXPECT_DOUBLE_EQ(t.finalAcc, 0.88);
  EXPECT_EQ(t.evals, 5u);
  EXPECT_EQ(t.lastStep, 250);
  EXPECT_DOUBLE_EQ(trainingSamplesPerS(t, 128), 250.0 * 128 / 20);
  EXPECT_EQ(trainingSamplesPerS(timeToAccuracy({}, 0.5), 128), 0);
  EXPECT_TRUE(timeToAccuracy(points, 0.70).reached);  // the target itself counts
  const TimeToAccuracy missed = timeToAccuracy(points, 0.9);
  EXPECT_FALSE(missed.reached);
  EXPECT_DOUBLE_EQ(missed.bestAcc, 0.88);
  EXPECT_EQ(timeToAccuracy({}, 0.5).evals, 0u);
}

TEST(BenchPsFigures, StalenessSummary) {
  // 100 updates: 60 at 0, 30 at 1, 9 at 2, 1 at 5.
  std::vector<std::uint64_t> h(65, 0);
  h[0] = 60, h[1] = 30, h[2] = 9, h[5] = 1;
  const StalenessSummary s = summarizeStaleness(h);
  EXPECT_EQ(s.updates, 100u);
  EXPECT_DOUBLE_EQ(s.mean, (30 + 18 + 5) / 100.0);
  EXPECT_EQ(s.p50, 0);
  EXPECT_EQ(s.p99, 2);
  EXPECT_EQ(s.max, 5);
  EXPECT_FALSE(s.saturated);
  EXPECT_EQ(stalenessText(s), "0.53/0/2/5");
  h[64] = 1;
  EXPECT_TRUE(summarizeStaleness(h).saturated);
  EXPECT_EQ(stalenessText(summarizeStaleness(h)).back(), '+');
  EXPECT_EQ(summarizeStaleness({}).updates, 0u);
  EXPECT_EQ(stalenessText(summarizeStaleness({0, 0})), "-");
  EXPECT_EQ(summarizeStaleness({0, 0, 7}).p50, 2);
  // metrics.jsonl leaves out the trailing zeros: a last entry below 64 is no saturated bucket.
  EXPECT_FALSE(summarizeStaleness({0, 0, 7}).saturated);
  EXPECT_EQ(stalenessText(summarizeStaleness({1, 0, 0, 1})), "1.50/0/3/3");
}

TEST(BenchPsFigures, MetricsLines) {
  const std::vector<std::string> lines = {
      R"({"epoch":1,"samples_per_s":1000,"seconds":10,"steps":100,"test_accuracy":0.8,"staleness":[5,3],"clock_wait_s":0.5})",
      "",
      "not json",
      R"({"epoch":2,"samples_per_s":2000,"seconds":30,"steps":300,"test_accuracy":0.85,"staleness":[1,1,2],"clock_wait_s":1.5})",
  };
  const RunTotals t = parseMetricsLines(lines);
  EXPECT_EQ(t.epochs, 2u);
  EXPECT_DOUBLE_EQ(t.seconds, 40);
  EXPECT_DOUBLE_EQ(t.samplesPerS, (10000.0 + 60000.0) / 40);
  EXPECT_EQ(t.steps, 400);
  ASSERT_TRUE(t.testAcc.has_value());
  EXPECT_DOUBLE_EQ(*t.testAcc, 0.85);
  EXPECT_TRUE(t.hasStaleness);
  EXPECT_EQ(t.staleness, (std::vector<std::uint64_t>{6, 4, 2}));
  EXPECT_DOUBLE_EQ(t.clockWaitS, 2.0);
  EXPECT_FALSE(parseMetricsLines({R"({"samples_per_s":1,"seconds":1,"test_accuracy":null})"}).hasStaleness);
  EXPECT_THROW(parseMetricsLines({R"({"epoch":1,"samples_per_s":"fast","seconds":1})"}), Error);
}

AccuracyRow row(const std::string& mode, bool straggler, bool reached, double timeS, double best) {
  AccuracyRow r;
  r.run = {mode, straggler};
  r.ok = true;
  r.tta.reached = reached;
  r.tta.timeS = timeS;
  r.tta.step = 100;
  r.tta.bestAcc = best;
  r.tta.finalAcc = best;
  r.tta.evals = 3;
  r.totals.samplesPerS = 1000;
  return r;
}

TEST(BenchPsReport, Winners) {
  AccuracySettings s;
  std::vector<AccuracyRow> rows = {row("allreduce", false, true, 30, 0.87),
                                   row("ps:asp", false, true, 40, 0.86), row("ps:bsp", false, false, 0, 0.84),
                                   row("allreduce", true, true, 60, 0.87),
                                   row("ps:asp", true, true, 45, 0.86)};
  AccuracyRow failed;
  failed.run = {"ps:ssp:2", true};
  failed.error = "exited with code 1";
  rows.push_back(failed);
  ASSERT_NE(accuracyWinner(rows, false), nullptr);
  EXPECT_EQ(accuracyWinner(rows, false)->run.mode, "allreduce");
  EXPECT_EQ(accuracyWinner(rows, true)->run.mode, "ps:asp");
  const std::string text = winnerText(s, rows);
  EXPECT_NE(text.find("winner without a straggler: allreduce (0.85 in 30.0 s"), std::string::npos) << text;
  EXPECT_NE(text.find("with rank 1 slowed 2x: ps:asp"), std::string::npos) << text;
  EXPECT_NE(text.find("1.33x slower"), std::string::npos) << text;

  // Nobody reached the target: the best accuracy wins, and the line says so.
  const std::vector<AccuracyRow> none = {row("allreduce", false, false, 0, 0.80),
                                         row("ps:asp", false, false, 0, 0.82)};
  EXPECT_EQ(accuracyWinner(none, false)->run.mode, "ps:asp");
  EXPECT_NE(winnerText(s, none).find("no mode reached the target"), std::string::npos);
  EXPECT_NE(winnerText(s, {failed}).find("none"), std::string::npos);

  EXPECT_NE(accuracyRow(failed).find("FAILED: exited with code 1"), std::string::npos);
  EXPECT_NE(accuracyRow(rows[2]).find("not reached"), std::string::npos);

  const nlohmann::json j = accuracyJson(s, rows, PsMachine{2, 2, 0.5});
  EXPECT_EQ(j["part"], "accuracy");
  ASSERT_EQ(j["rows"].size(), rows.size());
  EXPECT_EQ(j["rows"][0]["time_to_target_s"], 30.0);
  EXPECT_TRUE(j["rows"][2]["time_to_target_s"].is_null());
  EXPECT_EQ(j["rows"][5]["ok"], false);
  EXPECT_EQ(j["rows"][5]["error"], "exited with code 1");
  EXPECT_EQ(j["winner"]["without_straggler"], "allreduce");
  EXPECT_EQ(j["winner"]["with_straggler"], "ps:asp");
}

TEST(BenchPsReport, ThroughputTableAndJson) {
  ThroughputSettings s;
  ThroughputPoint one{1, 2, 200, 2.0, 400'000'000, 400'000'000, {400}, {300, 100}, 0.1, {0}, {1000}};
  ThroughputPoint two{2,          2,     300, 2.0,        600'000'000, 600'000'000,
                      {300, 300}, {600}, 0.2, {300, 300}, {990, 1000}};
  const std::vector<ThroughputPoint> points = {two, one};  // the reference is the fewest servers
  EXPECT_EQ(throughputReference(points)->servers, 1);
  EXPECT_DOUBLE_EQ(one.stepsPerS(), 100);
  EXPECT_DOUBLE_EQ(one.megabytesPerS(), 400);
  const std::string text = throughputRow(two, one.stepsPerS());
  EXPECT_NE(text.find("1.50"), std::string::npos) << text;
  EXPECT_NE(text.find("300+300,300+300"), std::string::npos) << text;
  EXPECT_NE(throughputRow(one, one.stepsPerS()).find(" 400\n"), std::string::npos);  // no backup, no "+0"
  const std::string summary = throughputSummary(points, PsMachine{2, 2, 0});
  EXPECT_NE(summary.find("2 servers give 1.50x the steps/s of 1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("differ by 1.0%"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("gain here"), std::string::npos) << summary;
  ThroughputPoint same = two;
  same.steps = 210;  // 1.05x on 2 cores with 4 threads: the note says why
  EXPECT_NE(throughputSummary({one, same}, PsMachine{2, 2, 0}).find("little gain here"), std::string::npos);
  same.steps = 150;  // slower than one server
  EXPECT_NE(throughputSummary({one, same}, PsMachine{2, 2, 0}).find("no gain here"), std::string::npos);
  EXPECT_EQ(throughputSummary({one, same}, PsMachine{16, 16, 0}).find("gain here"), std::string::npos);
  EXPECT_EQ(throughputSummary({one}, PsMachine{2, 2, 0}), "");
  EXPECT_NE(throughputRow(two, std::nullopt).find(" - "), std::string::npos);

  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  const std::string settings = throughputSettingsText(s, keys, PsMachine{2, 4, -1});
  EXPECT_NE(settings.find("2 usable cores (4 online)"), std::string::npos) << settings;
  EXPECT_NE(settings.find("share these cores"), std::string::npos) << settings;
  const nlohmann::json j = throughputJson(s, keys, points, PsMachine{2, 2, 0.25});
  EXPECT_EQ(j["part"], "throughput");
  EXPECT_EQ(j["speedup_reference_servers"], 1);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["rows"][0]["speedup"].get<double>(), 1.5);
  EXPECT_EQ(j["rows"][1]["staleness"]["counts"], (std::vector<int>{300, 100}));
  EXPECT_DOUBLE_EQ(j["rows"][1]["staleness"]["mean"].get<double>(), 0.25);
  EXPECT_EQ(j["key_sizes"].size(), keys.size());
  EXPECT_EQ(j["replicate"], true);
}

TEST(BenchPsReport, LaunchedThroughputIsOneFlatRow) {
  ThroughputSettings s;
  s.replicate = false;
  ThroughputPoint p;  // from the workers only: no server figures
  p.servers = 2;
  p.workers = 2;
  p.steps = 40;
  p.seconds = 4;
  p.bytesPushed = p.bytesPulled = 200'000'000;
  p.staleness = {30, 10};
  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  const nlohmann::json j = launchedThroughputJson(s, keys, p, 4.5, PsMachine{2, 2, 0.5});
  EXPECT_EQ(j["launched"], true);
  EXPECT_EQ(j["servers"], 2);
  EXPECT_EQ(j["workers"], 2);
  EXPECT_EQ(j["floats"], s.floats);
  EXPECT_EQ(j["replicate"], false);
  EXPECT_DOUBLE_EQ(j["steps_per_s"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(j["worker_steps_per_s_min"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(j["mb_per_s"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["staleness"]["mean"].get<double>(), 0.25);
  const std::string row = throughputRow(p, std::nullopt);
  EXPECT_NE(row.find(" - "), std::string::npos) << row;  // no speedup, no server updates
  const std::string settings = launchedThroughputSettingsText(s, keys, p);
  EXPECT_NE(settings.find("2 worker(s) and 2 server process(es)"), std::string::npos) << settings;
  EXPECT_NE(settings.find("--no-replication"), std::string::npos) << settings;
}

TEST(BenchPsParse, LaunchedFlagsFitTheJob) {
  EXPECT_NO_THROW(checkLaunchedPart(PsBenchPart::kThroughput));
  EXPECT_THROW(checkLaunchedPart(PsBenchPart::kAll), InvalidArgument);
  PsBenchFlags f;
  EXPECT_NO_THROW(checkLaunchedFlags(f, 2));  // nothing given: the job's servers and ranks
  f.serversGiven = true;
  f.servers = "1,2";
  EXPECT_THROW(checkLaunchedFlags(f, 2), InvalidArgument);
  f.servers = "2";
  f.throughput.servers = {2};
  EXPECT_NO_THROW(checkLaunchedFlags(f, 2));
  EXPECT_THROW(checkLaunchedFlags(f, 3), InvalidArgument);
  f.workersGiven = true;
  EXPECT_THROW(checkLaunchedFlags(f, 2), InvalidArgument);
}

TEST(BenchPsFigures, AccuracyRowFromARunsRecords) {
  AccuracySettings s;
  s.target = 0.85;
  AccuracyRow r;
  readAccuracyRecords(
      r, s,
      {R"({"step": 50, "time_s": 4, "test_acc": 0.8})", R"({"step": 100, "time_s": 8, "test_acc": 0.86})"},
      {R"({"epoch":1,"samples_per_s":1000,"seconds":10,"steps":100,"staleness":[5,3],"clock_wait_s":0.5})"},
      "/runs/a/eval.jsonl");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.tta.reached);
  EXPECT_EQ(r.tta.step, 100);
  EXPECT_DOUBLE_EQ(r.samplesPerS, 100.0 * 128 / 8);
  EXPECT_TRUE(r.totals.hasStaleness);
  AccuracyRow none;
  readAccuracyRecords(none, s, {""}, {}, "/runs/b/eval.jsonl");
  EXPECT_FALSE(none.ok);
  EXPECT_EQ(none.error,
            "the run wrote no evaluations to /runs/b/eval.jsonl (it needs a gyre train with --eval-every)");
  AccuracyRow bad;
  readAccuracyRecords(bad, s, {"{"}, {}, "/runs/c/eval.jsonl");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("eval.jsonl line"), std::string::npos) << bad.error;
}

}  // namespace
}  // namespace gyre::app
#endif
