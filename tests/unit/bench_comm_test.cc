// `gyre bench comm`'s settings, plan, figures and report (bench/cli/bench_comm_plan.h), without
// running anything. Without the gyre tool (GYRE_BUILD_APPS, gyre_bench) this file has no tests.
#if __has_include("bench_comm_plan.h")
#include <gtest/gtest.h>

#include <algorithm>

#include "bench_comm_plan.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

bool has(const std::vector<std::string>& args, const std::vector<std::string>& run) {
  return std::search(args.begin(), args.end(), run.begin(), run.end()) != args.end();
}

TEST(BenchComm, ListsAreCheckedAndNamesFolded) {
  EXPECT_EQ(parseCompressionList("none,fp16,topk:0.01,powersgd:4"),
            (std::vector<std::string>{"none", "fp16", "topk:0.01", "powersgd:4"}));
  EXPECT_EQ(parseAlgorithmList("auto,hd,hier"),
            (std::vector<std::string>{"auto", "halving-doubling", "hierarchical"}));
  for (const char* bad : {"", "none,,fp16", "fp16,fp16", "topk:0", "powersgd:0", "gzip"})
    EXPECT_THROW(parseCompressionList(bad), InvalidArgument) << bad;
  for (const char* bad : {"", "ring,ring", "butterfly", "hd,halving-doubling"})
    EXPECT_THROW(parseAlgorithmList(bad), InvalidArgument) << bad;
  CommSettings s;
  EXPECT_NO_THROW(validate(s));  // 2 workers here
  s.np = 1;
  EXPECT_THROW(validate(s), InvalidArgument);
  s = CommSettings{};
  s.rshAgent = "netns-rsh";  // only with --hosts
  EXPECT_THROW(validate(s), InvalidArgument);
  s.hosts = "a:2,b:2";
  s.np = 0;
  EXPECT_NO_THROW(validate(s));
  s.target = 1.5;
  EXPECT_THROW(validate(s), InvalidArgument);
}

TEST(BenchComm, EveryCompressionWithEveryAlgorithmAndTheirCommandLines) {
  CommSettings s;
  s.compressions = {"none", "topk:0.01", "fp16"};
  s.algorithms = {"auto", "ring"};
  const std::vector<CommRun> runs = planCommRuns(s);
  ASSERT_EQ(runs.size(), 5u);  // top-k once: its collectives are its own
  EXPECT_EQ(runs[1].label(), "none ring");
  EXPECT_EQ(runs[2].dirName(), "topk-0.01-auto");
  EXPECT_EQ(runs[4].label(), "fp16 ring");
  const std::vector<std::string> local = commRunArguments(s, runs[4], "/b/gyre_train_worker", "/r/x");
  EXPECT_EQ(local.front(), "run");
  EXPECT_TRUE(has(local, {"-np", "2", "--threads", "1", "--no-tag-output"}));  // gyre run's, not the worker's
  EXPECT_TRUE(has(local, {"--", "/b/gyre_train_worker", "--model", "cnn"}));
  EXPECT_TRUE(has(local, {"--compression", "fp16", "--allreduce", "ring"}));
  EXPECT_TRUE(has(local, {"--run-dir", "/r/x"}));
  EXPECT_FALSE(has(local, {"-H"}));
  EXPECT_FALSE(has(local, {"--lr-schedule"}));  // gyre train's default, constant
  s.lrSchedule = "cosine";
  EXPECT_TRUE(has(commRunArguments(s, runs[0], "w", "d"), {"--lr-schedule", "cosine"}));
  s.hosts = "h1:2,h2:2";
  s.np = 0;
  s.rshAgent = "tests/netns/netns-rsh";
  s.networkInterface = "gy0";
  const std::vector<std::string> hosts = commRunArguments(s, runs[0], "w", "d");
  EXPECT_TRUE(has(hosts, {"run", "-H", "h1:2,h2:2", "--rsh-agent", "tests/netns/netns-rsh",
                          "--network-interface", "gy0"}));
  EXPECT_FALSE(has(hosts, {"-np"}));  // every slot
}

TEST(BenchComm, FiguresTableAndJson) {
  CommSettings s;
  s.target = 0.8;
  s.batch = 100;
  const std::vector<std::string> evals = {R"({"step": 20, "time_s": 2.0, "test_acc": 0.7})",
                                          R"({"step": 40, "time_s": 4.0, "test_acc": 0.82})",
                                          R"({"step": 60, "time_s": 6.0, "test_acc": 0.85})"};
  const std::vector<std::string> metrics = {
      R"({"epoch": 1, "samples_per_s": 900, "seconds": 7, "steps": 60, "test_accuracy": 0.86, "bytes_per_step": 1000})"};
  CommRow base = parseCommRun(s, {"none", "auto"}, evals, metrics);
  EXPECT_TRUE(base.ok);
  EXPECT_TRUE(base.tta.reached);
  EXPECT_EQ(base.tta.step, 40);
  EXPECT_DOUBLE_EQ(base.tta.timeS, 4.0);
  EXPECT_DOUBLE_EQ(base.samplesPerS, 100 * 60 / 6.0);
  EXPECT_DOUBLE_EQ(base.bytesPerStep, 1000);
  EXPECT_DOUBLE_EQ(*base.finalAcc, 0.86);
  CommRow fast =
      parseCommRun(s, {"powersgd:4", "auto"}, {R"({"step": 40, "time_s": 2.0, "test_acc": 0.81})"},
                   {R"({"epoch": 1, "samples_per_s": 1, "seconds": 2, "steps": 40, "bytes_per_step": 50})"});
  const std::string row = commRowText(fast, &base);
  EXPECT_NE(row.find("powersgd:4"), std::string::npos) << row;
  EXPECT_NE(row.find("2.00x"), std::string::npos) << row;  // 4 s against 2 s
  EXPECT_NE(row.find("2.0 s"), std::string::npos) << row;
  CommRow failed;
  failed.run = {"bf16", "ring"};
  failed.error = "exit 1";
  EXPECT_NE(commRowText(failed, &base).find("failed: exit 1"), std::string::npos);
  EXPECT_NE(commHeader(s).find("to 0.8"), std::string::npos);
  const nlohmann::json j = commJson(s, {base, fast, failed});
  EXPECT_EQ(j.at("runs").size(), 3u);
  EXPECT_EQ(j.at("runs")[1].at("time_to_target_s"), 2.0);
  EXPECT_EQ(j.at("runs")[2].at("ok"), false);
  EXPECT_THROW(parseCommRun(s, {"none", "auto"}, {}, metrics), Error);  // no evaluations
  EXPECT_THROW(parseCommRun(s, {"none", "auto"}, evals, {R"({"samples_per_s": 1, "seconds": 2, "steps": 40})"}), Error);
}

}  // namespace
}  // namespace gyre::app
#endif
