// `gyre bench parallel`'s settings, plan, figures and targets (bench/cli/bench_parallel_plan.h)
// and what it prints (bench_parallel_report.h), without running anything. Without the gyre tool
// (GYRE_BUILD_APPS, gyre_bench) this file has no tests.
#if __has_include("bench_parallel_plan.h")
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bench_parallel_plan.h"
#include "bench_parallel_report.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

// A worker's epoch line as `gyre train --json` prints it, with the fields the bench reads.
std::string epochLine(double samplesPerS, double seconds, const std::string& pipeline) {
  return R"({"epoch":1,"samples_per_s":)" + std::to_string(samplesPerS) + R"(,"seconds":)" +
         std::to_string(seconds) +
         R"(,"steps":40,"timed_steps":35,"compute_s":1.0,"communicate_s":0.1,"wait_s":0.05,"hidden_s":0.05,)" +
         R"("torch_threads":1,"blas_threads":1,"loss":0.5,"peak_rss_bytes":1048576,"model_state_bytes":2048,)" +
         R"("pipeline":)" + pipeline + "}";
}

ParallelResult pipelineRow(const std::string& schedule, int m, double samplesPerS, double bubble,
                           double ideal, std::int64_t activations) {
  ParallelResult r;
  r.config.name = schedule;
  r.config.world = 2;
  r.config.pp = 2;
  r.config.schedule = schedule;
  r.config.microBatches = m;
  r.figures.run.samplesPerS = samplesPerS;
  r.figures.bubble = bubble;
  r.figures.idealBubble = ideal;
  r.figures.peakActivationBytes = activations;
  return r;
}

const TargetCheck& check(const std::vector<TargetCheck>& checks, const std::string& name) {
  const auto it =
      std::find_if(checks.begin(), checks.end(), [&](const TargetCheck& t) { return t.name == name; });
  if (it == checks.end()) throw Error("no target " + name);
  return *it;
}

TEST(BenchParallel, ListsAndSettingsAreChecked) {
  EXPECT_EQ(parseMicroBatchList("1,2,4,8,16"), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(parseScheduleList("1f1b,zero-bubble"), (std::vector<std::string>{"1f1b", "zero-bubble"}));
  for (const char* bad : {"", "0", "1,1", "4,x", "2000"})
    EXPECT_THROW(parseMicroBatchList(bad), InvalidArgument) << bad;
  for (const char* bad : {"", "1f1b,1f1b", "pipedream"})
    EXPECT_THROW(parseScheduleList(bad), InvalidArgument) << bad;
  ParallelBenchSettings s;
  EXPECT_NO_THROW(validate(s));
  s.microBatches = {512};  // 256 samples per replica at dp = 2
  EXPECT_THROW(validate(s), InvalidArgument);
  s = {};
  s.skip = s.steps;
  EXPECT_THROW(validate(s), InvalidArgument);
  s = {};
  s.model = "resnet";
  EXPECT_THROW(validate(s), InvalidArgument);
}

TEST(BenchParallel, ThePlanRunsEveryScheduleAndMicroBatchCount) {
  ParallelBenchSettings s;
  const std::vector<ParallelConfig> plan = planParallel(s);
  ASSERT_EQ(plan.size(), 5u + 3 * 5 + 4 + 3 + 4);  // interleaved: m = 2, 4, 8, 16
  EXPECT_EQ(plan[0].world, 1);
  EXPECT_TRUE(plan[0].flags("time").empty());
  EXPECT_EQ(plan[2].flags("time"), (std::vector<std::string>{"--zero", "1"}));
  EXPECT_EQ(plan[3].flags("time"), (std::vector<std::string>{"--zero", "2"}));
  EXPECT_EQ(plan[4].name, "dp=2 zero-3");
  EXPECT_EQ(plan[4].flags("time"), (std::vector<std::string>{"--zero", "3"}));
  EXPECT_EQ(plan[5].name, "pp=2 gpipe m=1");
  // gyre train's flags that differ from its defaults, in its table's order.
  EXPECT_EQ(plan[5].flags("time"), (std::vector<std::string>{"--pp", "2", "--micro-batches", "1",
                                                             "--schedule", "gpipe", "--balance", "time"}));
  EXPECT_EQ(plan[20].name, "pp=2 interleaved v=2 m=2");
  EXPECT_EQ(plan[20].flags("even"),  // even: the default --balance
            (std::vector<std::string>{"--pp", "2", "--micro-batches", "2", "--schedule", "interleaved",
                                      "--virtual-stages", "2"}));
  const ParallelConfig& mesh = plan[plan.size() - 7];
  EXPECT_EQ(mesh.name, "dp=2 x pp=2 1f1b m=8");
  EXPECT_EQ(mesh.world, 4);
  EXPECT_EQ(plan[plan.size() - 5].name, "dp=4 zero-3");
  EXPECT_EQ(plan[plan.size() - 3].name, "dp=2 x tp=2");
  EXPECT_EQ(plan[plan.size() - 3].flags("time"), (std::vector<std::string>{"--tp", "2"}));
  EXPECT_EQ(plan.back().name, "tp=2 w512");
  EXPECT_EQ(plan.back().batch, 128);
  EXPECT_EQ(plan.back().flags("time"),
            (std::vector<std::string>{"--vit-width", "512", "--vit-heads", "8", "--tp", "2"}));
  EXPECT_EQ(plan[plan.size() - 2].flags("time"),
            (std::vector<std::string>{"--vit-width", "512", "--vit-heads", "8"}));
  s.microBatches = {16, 2};
  const std::vector<ParallelConfig> fewer = planParallel(s);
  EXPECT_EQ(fewer[fewer.size() - 7].microBatches, 2);  // the mesh row: the largest m of at most 8
  s.model = "mlp";  // no transformer blocks to split: no tensor-parallel rows
  EXPECT_EQ(planParallel(s).back().name, "dp=4 zero-3");
}

TEST(BenchParallel, EpochLinesGiveTheRowsFigures) {
  EXPECT_FALSE(parseParallelLine("epoch 1/1  loss 0.5"));
  const std::optional<ParallelFigures> dp = parseParallelLine(epochLine(1000, 2, "null"));
  ASSERT_TRUE(dp);
  EXPECT_EQ(dp->peakRssBytes, 1 << 20);
  EXPECT_EQ(dp->modelStateBytes, 2048);
  EXPECT_FALSE(dp->bubble);
  const std::string pipeline =
      R"({"pp":2,"dp":1,"micro_batches":4,"schedule":"1f1b","balance":[3,3],"bubble":0.3,"ideal_bubble":0.2,"stage_times_bubble":0.25,"stage_ms":[1.5,1.0],"peak_activation_bytes":4096})";
  const std::optional<ParallelFigures> a = parseParallelLine(epochLine(1000, 1, pipeline));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->balance, (std::vector<int>{3, 3}));
  EXPECT_DOUBLE_EQ(*a->bubble, 0.3);
  EXPECT_DOUBLE_EQ(*a->stageTimesBubble, 0.25);
  EXPECT_EQ(a->peakActivationBytes, 4096);
  ParallelFigures b = *a;
  b.bubble = 0.6;
  b.stageTimesBubble = 0.45;
  b.run.seconds = 3;
  b.run.samplesPerS = 2000;
  const ParallelFigures both = combineParallel({*a, b});
  EXPECT_DOUBLE_EQ(*both.bubble, (0.3 * 1 + 0.6 * 3) / 4);  // weighted by time
  EXPECT_DOUBLE_EQ(*both.stageTimesBubble, (0.25 * 1 + 0.45 * 3) / 4);
  EXPECT_DOUBLE_EQ(both.run.samplesPerS, (1000.0 * 1 + 2000.0 * 3) / 4);
  // An epoch record (train/records.h) with a field of the wrong type; one without the memory
  // fields (written before they existed) reads them as unknown.
  EXPECT_THROW(parseParallelLine(R"({"epoch":1,"samples_per_s":1,"seconds":1,"peak_rss_bytes":"big"})"),
               Error);
  const std::optional<ParallelFigures> old =
      parseParallelLine(R"({"epoch":1,"samples_per_s":1,"seconds":1,"steps":1})");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->peakRssBytes, 0);
  EXPECT_FALSE(old->modelStateBytes);
  EXPECT_FALSE(old->bubble);
}

TEST(BenchParallel, TargetsCompareWithTheFormulaAndOneWorker) {
  ParallelResult single;
  single.config.name = "1 worker";
  single.figures.run.samplesPerS = 1000;
  const std::vector<ParallelResult> results = {
      single,
      pipelineRow("gpipe", 2, 900, 0.40, 1.0 / 3, 8000),  // m < 4: no bubble target
      pipelineRow("gpipe", 8, 1500, 0.12, 1.0 / 9, 16000),
      pipelineRow("1f1b", 8, 1600, 0.15, 1.0 / 9, 7000),
      pipelineRow("zero-bubble", 8, 1650, 0.08, 1.0 / 9, 5000),
  };
  const std::vector<TargetCheck> checks = evaluateParallelTargets("vit", results);
  EXPECT_THROW(check(checks, "bubble gpipe m=2"), Error);
  EXPECT_EQ(check(checks, "bubble gpipe m=8").status(), "PASS");  // 12% <= 11.1% x 1.1 + 2%
  EXPECT_EQ(check(checks, "bubble 1f1b m=8").status(), "MISS");   // 15% > 14.2%
  EXPECT_EQ(check(checks, "zero-bubble below 1f1b m=8").status(), "PASS");
  EXPECT_EQ(check(checks, "1f1b activations m=8").status(), "MISS");  // 7000 / 16000 > 3 / 8
  const TargetCheck& throughput = check(checks, "1f1b m=8 throughput");
  EXPECT_NEAR(*throughput.measured, 1600 / (2 * 1000 * (1 - 1.0 / 9)), 1e-12);
  EXPECT_EQ(throughput.status(), "PASS");
}

TEST(BenchParallel, ZeroThreeTargetsCompareWithPlainDataParallelism) {
  auto row = [](int world, int zero, double samplesPerS, std::int64_t stateBytes) {
    ParallelResult r;
    r.config.world = world;
    r.config.zero = zero;
    r.figures.run.samplesPerS = samplesPerS;
    r.figures.modelStateBytes = stateBytes;
    return r;
  };
  const std::vector<ParallelResult> results = {row(2, 0, 2000, 1000), row(2, 1, 1900, 900),
                                               row(2, 3, 1600, 560), row(4, 0, 3000, 1000),
                                               row(4, 3, 2000, 270)};
  const std::vector<TargetCheck> checks = evaluateParallelTargets("vit", results);
  EXPECT_EQ(check(checks, "zero-3 state N=2").status(), "MISS");  // 0.56 > 0.55
  EXPECT_NEAR(*check(checks, "zero-3 state N=2").measured, 0.56, 1e-12);
  EXPECT_EQ(check(checks, "zero-3 state N=4").status(), "PASS");  // 0.27 <= 0.275
  const TargetCheck& throughput = check(checks, "zero-3 throughput N=2");
  EXPECT_NEAR(*throughput.measured, 0.8, 1e-12);  // against plain dp = 2, not zero-1
  EXPECT_EQ(throughput.status(), "MISS");
}

TEST(BenchParallel, TensorParallelTargetIsOnTheWideVit) {
  auto row = [](int tp, int width, double samplesPerS) {
    ParallelResult r;
    r.config.world = tp;
    r.config.tp = tp;
    r.config.vitWidth = width;
    r.figures.run.samplesPerS = samplesPerS;
    return r;
  };
  const std::vector<ParallelResult> results = {row(1, 0, 1000), row(2, 0, 900), row(1, 512, 50),
                                               row(2, 512, 70)};
  const std::vector<TargetCheck> checks = evaluateParallelTargets("vit", results);
  const TargetCheck& t = check(checks, "tp=2 throughput");
  EXPECT_NEAR(*t.measured, 1.4, 1e-12);  // the wide rows', not the narrow ones'
  EXPECT_EQ(t.status(), "PASS");
  EXPECT_EQ(t.model, "vit w512");
}

// The value after `flag` in a command line ("" when absent).
std::string parallelFlagValue(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

TEST(BenchParallel, EachLayoutRunsUnderGyreRunWithOneThread) {
  const ParallelBenchSettings s;
  const std::vector<ParallelConfig> plan = planParallel(s);
  const std::vector<std::string> args = parallelRunArguments(s, plan[5], "/bin/worker");  // pp=2 gpipe m=1
  const std::vector<std::string> head = {"run", "--np",        "2",       "--threads", "1", "--no-tag-output",
                                         "--",  "/bin/worker", "--model", "vit"};
  ASSERT_GT(args.size(), head.size());
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(head.size())),
            head);
  EXPECT_EQ(std::find(args.begin(), args.end(), "--epochs"), args.end());  // 1, gyre train's default
  EXPECT_EQ(parallelFlagValue(args, "--max-steps"), "20");
  EXPECT_EQ(parallelFlagValue(args, "--batch"), "512");
  EXPECT_EQ(parallelFlagValue(args, "--skip-steps"), "3");
  EXPECT_EQ(parallelFlagValue(args, "--schedule"), "gpipe");
  EXPECT_NE(std::find(args.begin(), args.end(), "--no-eval"), args.end());
  const std::vector<std::string> wide = parallelRunArguments(s, plan.back(), "/bin/worker");  // tp=2 w512
  EXPECT_EQ(std::find(wide.begin(), wide.end(), "--batch"), wide.end());  // 128, gyre train's default
  EXPECT_EQ(parallelFlagValue(wide, "--vit-width"), "512");
}

TEST(BenchParallel, SettingsRowsAndSummary) {
  ParallelBenchSettings s;
  s.repeat = 3;
  EXPECT_EQ(
      parallelSettingsText(s),
      "model vit: global batch 512, 20 steps per run (3 untimed), 1 thread per worker, balance time, the "
      "median of 3 runs per row\n");
  s.repeat = 0;
  EXPECT_THROW(validate(s), InvalidArgument);
  s.repeat = 1;
  s.timeoutS = 0;
  EXPECT_THROW(validate(s), InvalidArgument);
  EXPECT_EQ(parallelHeader().rfind("layout ", 0), 0u);
  ParallelResult r = pipelineRow("1f1b", 8, 1000, 0.3, 0.25, 4 << 20);
  r.config.name = "pp=2 1f1b m=8";
  r.figures.balance = {3, 3};
  const std::string row = parallelRow(r);
  EXPECT_EQ(row.rfind("pp=2 1f1b m=8 ", 0), 0u) << row;
  EXPECT_NE(row.find(" 30.0% "), std::string::npos) << row;  // the bubble
  EXPECT_NE(row.find(" 25.0% "), std::string::npos) << row;  // its formula
  EXPECT_NE(row.find(" 4.0 "), std::string::npos) << row;    // activations, MiB
  EXPECT_NE(row.find("  3,3\n"), std::string::npos) << row;
  const nlohmann::json j = parallelRowJson(r);
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["micro_batches"], 8);
  EXPECT_TRUE(j["vit_width"].is_null());
  EXPECT_TRUE(j["stage_times_bubble"].is_null());
  EXPECT_DOUBLE_EQ(j["bubble"].get<double>(), 0.3);
  const std::vector<TargetCheck> checks = evaluateParallelTargets("vit", {r});
  ASSERT_EQ(checks.size(), 1u);
  const nlohmann::json summary = parallelSummaryJson(checks);
  EXPECT_EQ(summary["summary"], true);
  EXPECT_EQ(summary["targets"][0]["name"], "bubble 1f1b m=8");
  EXPECT_EQ(summary["targets"][0]["status"], "MISS");
  EXPECT_NE(parallelSummaryText(checks).find("\ntargets (vit):\n"), std::string::npos);
}

}  // namespace
}  // namespace gyre::app
#endif
