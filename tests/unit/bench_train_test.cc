// `gyre bench train`'s plan, figures, targets and report (bench/cli/bench_train_plan.h,
// bench_train_report.h) and the machine check it shares (bench/common/bench_machine.h), without
// running anything. The gyre tool's sources are only on the include path when it is built
// (GYRE_BUILD_APPS, gyre_bench); without it this file has no tests.
#if __has_include("bench_train_plan.h")
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bench_machine.h"
#include "bench_train_plan.h"
#include "bench_train_report.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

TEST(BenchTrainParse, WorldList) {
  EXPECT_EQ(parseWorldList("1,2"), (std::vector<int>{1, 2}));
  EXPECT_EQ(parseWorldList("2"), (std::vector<int>{2}));
  EXPECT_EQ(parseWorldList("4,1"), (std::vector<int>{4, 1}));
  for (const char* bad : {"", "0", "1,,2", "1,2,", "x", "2 ", "-1", "65", "1,1", "1.5"})
    EXPECT_THROW(parseWorldList(bad), InvalidArgument) << bad;
}

TEST(BenchTrainParse, Models) {
  EXPECT_EQ(parseModelList("mlp,cnn"), (std::vector<std::string>{"mlp", "cnn"}));
  EXPECT_EQ(parseModelList("cnn"), (std::vector<std::string>{"cnn"}));
  EXPECT_THROW(parseModelList("resnet"), InvalidArgument);
  EXPECT_THROW(parseModelList("mlp,mlp"), InvalidArgument);
  EXPECT_THROW(parseModelList(""), InvalidArgument);
}

TEST(BenchTrainParse, ThreadsGrid) {
  EXPECT_EQ(parseThreadsGrid("default"), (std::vector<ThreadPair>{{1, 1}, {1, 2}, {2, 2}}));
  EXPECT_EQ(parseThreadsGrid("1:1,2:1"), (std::vector<ThreadPair>{{1, 1}, {2, 1}}));
  for (const char* bad : {"", "1", "1:", ":1", "1:1,1:1", "0:1", "1x2", "1:2:3"})
    EXPECT_THROW(parseThreadsGrid(bad), InvalidArgument) << bad;
  EXPECT_EQ(parsePick("median"), Pick::kMedian);
  EXPECT_THROW(parsePick("mean"), InvalidArgument);
}

TEST(BenchTrainPlan, Validate) {
  TrainBenchSettings s;
  EXPECT_NO_THROW(validate(s));
  s.worlds = {1, 3};
  EXPECT_THROW(validate(s), InvalidArgument);  // 128 is not divisible by 3
  s = {};
  s.steps = 5;
  s.skip = 5;
  EXPECT_THROW(validate(s), InvalidArgument);  // no timed step left
}

TEST(BenchTrainPlan, OrderAndReferences) {
  TrainBenchSettings s;
  s.ddp = true;
  s.steps = 50;
  const std::vector<TrainConfig> plan = planModel(s, "cnn");
  ASSERT_EQ(plan.size(), 8u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plan[i].runner, TrainRunner::kPlain);
    EXPECT_EQ(plan[i].globalBatch, 128);
    EXPECT_EQ(plan[i].threads, s.plainThreads[i]);
  }
  // The E(2) reference: one worker's share, the same steps at batch 64, 1:1 threads.
  EXPECT_EQ(plan[3].runner, TrainRunner::kPlain);
  EXPECT_EQ(plan[3].referenceFor, 2);
  EXPECT_EQ(plan[3].globalBatch, 64);
  EXPECT_EQ(plan[3].threads, (ThreadPair{1, 1}));
  EXPECT_EQ(plan[3].label(), "plain ref E(2)");
  // Two of them side by side: E(2)'s ceiling.
  EXPECT_EQ(plan[4].runner, TrainRunner::kPlain);
  EXPECT_EQ(plan[4].referenceFor, 2);
  EXPECT_EQ(plan[4].world, 2);
  EXPECT_EQ(plan[4].batchPerProcess(), 64);
  EXPECT_EQ(plan[4].threads, (ThreadPair{1, 1}));
  EXPECT_EQ(plan[4].label(), "plain ref E(2) x2");
  EXPECT_EQ(plan[5].runner, TrainRunner::kGyre);
  EXPECT_EQ(plan[5].world, 1);
  EXPECT_EQ(plan[6].runner, TrainRunner::kGyre);
  EXPECT_EQ(plan[6].world, 2);
  EXPECT_EQ(plan[6].batchPerProcess(), 64);
  EXPECT_EQ(plan[7].runner, TrainRunner::kDdp);
  EXPECT_EQ(plan[7].world, 2);
  for (const TrainConfig& c : plan) {
    EXPECT_EQ(c.steps, 50);
    EXPECT_EQ(c.skip, 5);
  }
  s.steps = 0;
  EXPECT_EQ(planModel(s, "mlp").front().steps, defaultSteps("mlp"));
}

TEST(BenchTrainPlan, SplitSteps) {
  // 60000 / 128 = 468 steps fit in an epoch.
  EXPECT_EQ(splitSteps(400, 128).epochs, 1);
  EXPECT_EQ(splitSteps(400, 128).stepsPerEpoch, 400);
  EXPECT_EQ(splitSteps(468, 128).epochs, 1);
  EXPECT_EQ(splitSteps(900, 128).epochs, 2);
  EXPECT_EQ(splitSteps(900, 128).stepsPerEpoch, 450);
  EXPECT_EQ(splitSteps(900, 64).epochs, 1);  // 937 per epoch
  EXPECT_EQ(splitSteps(1000, 128).epochs, 3);
  EXPECT_EQ(splitSteps(1000, 128).stepsPerEpoch, 334);
}

TEST(BenchTrainFigures, EpochLines) {
  EXPECT_FALSE(parseEpochLine("epoch 1: loss 0.3"));
  EXPECT_FALSE(parseEpochLine("{not json"));
  EXPECT_FALSE(parseEpochLine(R"({"event":"start"})"));
  EXPECT_FALSE(parseEpochLine(R"({"rank":1,"samples_per_s":5,"seconds":1,"steps":2})"));
  const auto e = parseEpochLine(
      R"({"epoch":1,"world":2,"samples_per_s":1000,"seconds":2,"steps":20,"timed_steps":16,"compute_s":1.6,)"
      R"("communicate_s":0.5,"wait_s":0.4,"hidden_s":0.1,"torch_threads":1,"blas_threads":1,"loss":0.5,)"
      R"("test_accuracy":null})");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->hasSplit);
  EXPECT_EQ(e->steps, 16);  // the timed ones
  EXPECT_DOUBLE_EQ(e->stepMs(), 125.0);
  // Shares of the step time, compute + wait = 2 s, as `gyre train` prints them.
  EXPECT_DOUBLE_EQ(e->computeShare(), 0.8);
  EXPECT_DOUBLE_EQ(e->communicateShare(), 0.25);
  EXPECT_DOUBLE_EQ(e->waitShare(), 0.2);
  EXPECT_DOUBLE_EQ(e->hiddenShare(), 0.05);
  // The worker prints null threads when OPENBLAS_NUM_THREADS is unset.
  const auto unset = parseEpochLine(
      R"({"epoch":1,"loss":0.5,"samples_per_s":10,"seconds":1,"steps":3,"blas_threads":null})");
  ASSERT_TRUE(unset);
  EXPECT_EQ(unset->blasThreads, 0);
  // The DDP baseline's lines: the same record without the step split.
  const auto ddp = parseEpochLine(
      R"({"runner":"ddp","epoch":1,"loss":0.5,"samples_per_s":10,"seconds":1,"steps":3,"blas_threads":2})");
  ASSERT_TRUE(ddp);
  EXPECT_FALSE(ddp->hasSplit);
  EXPECT_EQ(ddp->blasThreads, 2);
  EXPECT_EQ(ddp->torchThreads, 0);
  EXPECT_THROW(parseEpochLine(R"({"epoch":1,"loss":0.5,"samples_per_s":"fast","seconds":1,"steps":3})"),
               Error);
}

TEST(BenchTrainFigures, CombineAndPick) {
  RunFigures a, b;
  a.samplesPerS = 100, a.seconds = 2, a.steps = 10, a.hasSplit = true, a.computeS = 1;
  b.samplesPerS = 400, b.seconds = 1, b.steps = 10, b.hasSplit = true, b.computeS = 1, b.blasThreads = 2;
  const RunFigures both = combineEpochs({a, b});
  EXPECT_DOUBLE_EQ(both.samplesPerS, 200.0);  // (200 + 400) samples / 3 s
  EXPECT_EQ(both.steps, 20);
  EXPECT_DOUBLE_EQ(both.computeS, 2.0);
  EXPECT_EQ(both.blasThreads, 2);

  std::vector<RunFigures> runs(4);
  const double thr[] = {300, 100, 400, 200};
  for (int i = 0; i < 4; ++i) runs[i].samplesPerS = thr[i];
  EXPECT_EQ(pickRun(runs, Pick::kBest), 2u);
  EXPECT_EQ(pickRun(runs, Pick::kMedian), 3u);  // 400 300 | 200 100: the slower middle run
  runs.resize(3);
  EXPECT_EQ(pickRun(runs, Pick::kMedian), 0u);  // 400 300 100
}

ConfigResult result(TrainRunner runner, int world, ThreadPair threads, double samplesPerS,
                    int referenceFor = 0) {
  ConfigResult r;
  r.config.model = "cnn";
  r.config.runner = runner;
  r.config.world = world;
  r.config.threads = threads;
  r.config.referenceFor = referenceFor;
  r.config.globalBatch = referenceFor > 0 ? 64 : 128;
  r.figures.samplesPerS = samplesPerS;
  return r;
}

const TargetCheck& named(const std::vector<TargetCheck>& checks, const std::string& name) {
  for (const TargetCheck& c : checks)
    if (c.name == name) return c;
  throw std::runtime_error("no target " + name);
}

TEST(BenchTrainTargets, FromTheIssue) {
  const std::vector<ConfigResult> results = {
      result(TrainRunner::kPlain, 1, {1, 1}, 1330), result(TrainRunner::kPlain, 1, {1, 2}, 1380),
      result(TrainRunner::kPlain, 1, {2, 2}, 1420), result(TrainRunner::kPlain, 1, {1, 1}, 1060, 2),
      result(TrainRunner::kPlain, 2, {1, 1}, 2014, 2),  // side by side: not the best plain loop
      result(TrainRunner::kGyre, 1, {1, 1}, 1300),  result(TrainRunner::kGyre, 2, {1, 1}, 2000),
      result(TrainRunner::kDdp, 2, {1, 1}, 1730),
  };
  const std::vector<TargetCheck> checks = evaluateTargets("cnn", results, true, "");
  const TargetCheck& overhead = named(checks, "1 worker overhead");
  EXPECT_NEAR(*overhead.measured, 1 - 1300.0 / 1330, 1e-12);
  EXPECT_EQ(overhead.status(), "PASS");  // 2.3% <= 3%
  const TargetCheck& e2 = named(checks, "E(2)");
  EXPECT_NEAR(*e2.measured, 2000.0 / 2120, 1e-12);
  EXPECT_EQ(e2.status(), "PASS");  // 0.943 >= 0.92
  const TargetCheck& ceiling = named(checks, "E(2) ceiling");
  EXPECT_NEAR(*ceiling.measured, 2014.0 / 2120, 1e-12);
  EXPECT_EQ(ceiling.status(), "info");
  const TargetCheck& plain = named(checks, "2 workers / best plain");
  EXPECT_NEAR(*plain.measured, 2000.0 / 1420, 1e-12);  // the best of the grid is 2:2
  EXPECT_EQ(plain.status(), "PASS");                   // 1.408 >= 1.4
  const TargetCheck& ddp = named(checks, "2 workers / DDP(2)");
  EXPECT_NEAR(*ddp.measured, 2000.0 / 1730, 1e-12);
  EXPECT_EQ(ddp.status(), "PASS");
  EXPECT_EQ(named(checks, "S(2)").status(), "info");

  // mlp's thresholds differ: 1.0x the best plain, 1.8x DDP.
  const std::vector<TargetCheck> mlp = evaluateTargets("mlp", results, true, "");
  EXPECT_EQ(named(mlp, "2 workers / DDP(2)").status(), "MISS");  // 1.16 < 1.8
  EXPECT_DOUBLE_EQ(*named(mlp, "2 workers / best plain").threshold, 1.0);
}

TEST(BenchTrainTargets, MissingRunsAreSkipped) {
  std::vector<ConfigResult> results = {result(TrainRunner::kPlain, 1, {2, 2}, 1420),
                                       result(TrainRunner::kGyre, 1, {1, 1}, 1500),
                                       result(TrainRunner::kGyre, 2, {1, 1}, 2000)};
  std::vector<TargetCheck> checks = evaluateTargets("cnn", results, true, "skipped: no python3 with torch");
  EXPECT_EQ(named(checks, "1 worker overhead").status(), "SKIP");  // no 1:1 plain run
  EXPECT_EQ(named(checks, "E(2)").status(), "SKIP");
  EXPECT_EQ(named(checks, "E(2) ceiling").status(), "SKIP");
  EXPECT_EQ(named(checks, "2 workers / DDP(2)").status(), "SKIP");
  EXPECT_EQ(named(checks, "2 workers / DDP(2)").skipped, "skipped: no python3 with torch");
  // Faster than the plain loop: a negative overhead passes.
  results.push_back(result(TrainRunner::kPlain, 1, {1, 1}, 1450));
  checks = evaluateTargets("cnn", results, false, "");
  EXPECT_EQ(named(checks, "1 worker overhead").status(), "PASS");
  for (const TargetCheck& c : checks) EXPECT_EQ(c.name.find("DDP"), std::string::npos);  // not requested
  // Worlds other than 2 are reported without a threshold.
  results.push_back(result(TrainRunner::kGyre, 4, {1, 1}, 3000));
  checks = evaluateTargets("cnn", results, false, "");
  EXPECT_EQ(named(checks, "E(4)").status(), "SKIP");  // no batch-32 reference
  EXPECT_EQ(named(checks, "4 workers / best plain").status(), "info");
}

TEST(BenchTrainReport, TableAndJson) {
  ConfigResult r = result(TrainRunner::kGyre, 2, {1, 1}, 2000);
  r.figures.seconds = 2, r.figures.steps = 31, r.figures.torchThreads = 1, r.figures.blasThreads = 2;
  r.figures.hasSplit = true, r.figures.computeS = 1.6, r.figures.waitS = 0.4;
  r.figures.communicateS = 0.8, r.figures.hiddenS = 0.4;
  r.runSamplesPerS = {1900, 2000};
  EXPECT_TRUE(threadsDiffer(r));
  const std::string row = tableRow(r);
  EXPECT_NE(row.find("gyre"), std::string::npos);
  EXPECT_NE(row.find("2!"), std::string::npos);  // blas threads reported differ from those asked
  EXPECT_NE(row.find("80.0"), std::string::npos);
  const nlohmann::json j = configJson(r, {});
  EXPECT_EQ(j["type"], "config");
  EXPECT_EQ(j["batch_per_rank"], 64);
  EXPECT_EQ(j["blas_threads"], 2);
  EXPECT_EQ(j["requested_blas_threads"], 1);
  EXPECT_DOUBLE_EQ(j["hidden_share"].get<double>(), 0.2);
  EXPECT_EQ(j["runs_samples_per_s"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["spread"].get<double>(), 0.05);
  EXPECT_NE(row.find("5.0\n"), std::string::npos);  // the spread column
  EXPECT_DOUBLE_EQ(runSpread({1000}), 0.0);

  const std::vector<TargetCheck> checks = evaluateTargets("cnn", {r}, true, "skipped: why");
  const nlohmann::json s = summaryJson(checks, {});
  EXPECT_EQ(s["type"], "summary");
  EXPECT_EQ(s["skip"], 4);  // E(2), its ceiling, best plain, DDP
  EXPECT_EQ(targetsTally(checks), "0 PASS, 0 MISS, 4 SKIP");
  EXPECT_NE(targetsText(checks).find("skipped: why"), std::string::npos);
}

TEST(BenchTrainPlan, SettingsFromFlags) {
  TrainBenchFlags f;
  f.models = "cnn";
  f.np = "1,4";
  f.baseline = "ddp";
  const TrainBenchSettings s = trainSettingsFrom(f);
  EXPECT_EQ(s.models, (std::vector<std::string>{"cnn"}));
  EXPECT_EQ(s.worlds, (std::vector<int>{1, 4}));
  EXPECT_TRUE(s.ddp);
  f.repeat = 0;
  EXPECT_THROW(trainSettingsFrom(f), InvalidArgument);
  f.repeat = 1;
  f.timeoutS = 0;
  EXPECT_THROW(trainSettingsFrom(f), InvalidArgument);
}

// Whether `argv` has `flag` followed by `value`.
bool hasFlagValue(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag && argv[i + 1] == value) return true;
  return false;
}

TEST(BenchTrainPlan, RunCommandLines) {
  TrainBenchFlags f;
  f.compression = "fp16";
  f.shardOptimizer = true;
  f.dataDir = "/data";
  const TrainPrograms p{"/bin/gyre", "/bin/worker", "/usr/bin/python3", "/bin/ddp.py", ""};
  TrainConfig c;
  c.model = "mlp";
  c.runner = TrainRunner::kGyre;
  c.world = 2;
  c.globalBatch = 128;
  c.steps = 900;
  c.skip = 5;
  const std::vector<std::string> gyre = trainRunArgv(c, f, p);
  ASSERT_GT(gyre.size(), 9u);
  EXPECT_EQ(std::vector<std::string>(gyre.begin(), gyre.begin() + 9),
            (std::vector<std::string>{"/bin/gyre", "run", "--np", "2", "--threads", "1", "--no-tag-output",
                                      "--", "/bin/worker"}));
  EXPECT_TRUE(hasFlagValue(gyre, "--epochs", "2"));  // 468 steps of batch 128 at most per epoch
  EXPECT_TRUE(hasFlagValue(gyre, "--max-steps", "450"));
  // The worker's arguments are those that differ from gyre train's defaults (lr 0.05 is one).
  EXPECT_EQ(std::find(gyre.begin(), gyre.end(), "--lr"), gyre.end());
  EXPECT_TRUE(hasFlagValue(gyre, "--data-dir", "/data"));
  EXPECT_TRUE(hasFlagValue(gyre, "--skip-steps", "5"));
  EXPECT_TRUE(hasFlagValue(gyre, "--compression", "fp16"));
  EXPECT_NE(std::find(gyre.begin(), gyre.end(), "--shard-optimizer"), gyre.end());
  c.runner = TrainRunner::kPlain;
  const std::vector<std::string> apart = trainRunArgv(c, f, p);  // two plain loops side by side
  ASSERT_GT(apart.size(), 9u);
  EXPECT_EQ(std::vector<std::string>(apart.begin(), apart.begin() + 9),
            std::vector<std::string>(gyre.begin(), gyre.begin() + 9));
  EXPECT_TRUE(hasFlagValue(apart, "--batch", "64"));  // each its own half
  EXPECT_EQ(std::find(apart.begin(), apart.end(), "--shard-optimizer"), apart.end());
  c.world = 1;
  const std::vector<std::string> plain = trainRunArgv(c, f, p);
  EXPECT_EQ(plain[0], "/bin/worker");
  EXPECT_NE(std::find(plain.begin(), plain.end(), "--plain"), plain.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "--compression"), plain.end());
  EXPECT_FALSE(hasFlagValue(plain, "--batch", "64"));
  c.runner = TrainRunner::kDdp;
  c.world = 2;
  const std::vector<std::string> ddp = trainRunArgv(c, f, p);
  ASSERT_GT(ddp.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(ddp.begin(), ddp.begin() + 8),
            (std::vector<std::string>{"/usr/bin/python3", "/bin/ddp.py", "--world", "2", "--skip-steps", "5",
                                      "--model", "mlp"}));
  EXPECT_EQ(std::find(ddp.begin(), ddp.end(), "--json"), ddp.end());
  EXPECT_EQ(threadEnvironment({2, 3}),
            (std::vector<std::pair<std::string, std::string>>{{"OPENBLAS_NUM_THREADS", "3"},
                                                              {"OMP_NUM_THREADS", "3"},
                                                              {"MKL_NUM_THREADS", "3"},
                                                              {"GYRE_NUM_THREADS", "2"}}));
}

TEST(BenchTrainReport, RepeatsWarningsAndSummary) {
  TrainConfig c;
  c.model = "mlp";
  c.runner = TrainRunner::kGyre;
  c.world = 2;
  std::vector<RunFigures> runs(3);
  runs[0].samplesPerS = 10, runs[1].samplesPerS = 30, runs[2].samplesPerS = 20;
  ConfigResult r = resultOf(c, runs, Pick::kBest);
  EXPECT_DOUBLE_EQ(r.figures.samplesPerS, 30);
  EXPECT_EQ(r.runSamplesPerS, (std::vector<double>{10, 30, 20}));
  EXPECT_DOUBLE_EQ(resultOf(c, runs, Pick::kMedian).figures.samplesPerS, 20);
  EXPECT_EQ(threadsWarning(r), "");  // the process reported no threads
  r.figures.torchThreads = 2, r.figures.blasThreads = 1;
  EXPECT_EQ(threadsWarning(r),
            "warning: mlp gyre asked for torch 1 blas 1 threads; the process reported 2 and 1\n");

  TrainBenchFlags f;
  f.repeat = 3;
  f.pick = "median";
  f.compression = "bf16";
  const TrainReportContext ctx = trainReportContext(f, BenchMachine{4, 8, 0.5});
  EXPECT_EQ(ctx.pick, Pick::kMedian);
  EXPECT_EQ(ctx.compression, "bf16");
  EXPECT_EQ(ctx.usableCores, 4);
  EXPECT_DOUBLE_EQ(ctx.loadAverage, 0.5);
  EXPECT_EQ(summaryText({}, ctx, 128),
            "\nsummary (global batch 128; median of 3 runs per configuration)\n0 PASS, 0 MISS, 0 SKIP\n");
}

TEST(BenchMachine, BusyWhenTheLoadExceedsHalfTheCores) {
  EXPECT_EQ(busyWarning(BenchMachine{2, 2, 1.0}), "");
  EXPECT_EQ(busyWarning(BenchMachine{2, 2, -1}), "");  // unknown
  EXPECT_EQ(busyWarning(BenchMachine{2, 4, 1.5}, "; advice"),
            "warning: the machine is busy (load average 1.50 on 2 cores): the figures will be low and noisy; "
            "advice\n");
}

}  // namespace
}  // namespace gyre::app
#endif
