// `gyre rl` as a user runs it: Ape-X with rollout actors in their own processes prints its live
// line, writes metrics.jsonl and return.svg; a rollout process SIGKILLed mid-run is reported, its
// actor rebuilt, and the run goes on to its end; bad flags exit 2 naming the flag. (Reaching 475 on
// CartPole is a benchmark run by hand, docs/rl.md, not a test.)
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"

namespace gyre {
namespace {

using train::cli::contains;
using train::cli::jsonLines;

constexpr auto kRlTimeout = std::chrono::seconds(300);

std::string rlWorker() {
  return (std::filesystem::path(train::cli::gyreTool()).parent_path() / "gyre_rl_worker").string();
}

class RlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(rlWorker())) GTEST_SKIP() << "no gyre_rl_worker in this build";
  }
  test::ProgramRun rl(std::vector<std::string> args) {
    args.insert(args.begin(), {train::cli::gyreTool(), "rl"});
    return test::runProgram({std::move(args), test::cleanEnvironment()}, kRlTimeout);
  }
};

// A short run of each algorithm: its line, metrics.jsonl (updates bounded by the env steps: Ape-X
// waits for the learner at 2 steps an update, IMPALA trains on 8 unrolls of 50, PPO on 8 of 128)
// and return.svg.
TEST_F(RlCli, EachAlgorithmWritesItsLiveLineMetricsAndPlot) {
  for (const auto& [algo, steps] :
       std::vector<std::pair<std::string, std::int64_t>>{{"apex", 4000}, {"impala", 20000}, {"ppo", 20480}}) {
    SCOPED_TRACE(algo);
    test::TempDir dir;
    const test::ProgramRun r =
        rl({"--algo", algo, "--actors", "2", "--max-env-steps", std::to_string(steps), "--learning-starts",
            "500", "--report-every", "0.5", "--run-dir", dir.path()});
    ASSERT_EQ(r.exitCode, 0) << r.describe() << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "gyre rl: " + algo + " on cartpole, 2 rollout actors")) << r.out;
    EXPECT_TRUE(contains(r.out, " s  env steps ")) << r.out;
    EXPECT_TRUE(contains(r.out, "not solved: the mean greedy return")) << r.out;
    const std::vector<nlohmann::json> records = jsonLines(dir.path() + "/metrics.jsonl");
    ASSERT_GE(records.size(), 2u);
    const nlohmann::json& last = records.back();
    EXPECT_TRUE(last.at("final").get<bool>());
    EXPECT_FALSE(last.at("solved").get<bool>());
    EXPECT_GE(last.at("env_steps").get<std::int64_t>(), steps);
    const std::int64_t perCall = algo == "apex" ? 64 : algo == "impala" ? 50 : 128;
    EXPECT_LT(last.at("env_steps").get<std::int64_t>(), steps + 2 * perCall);
    if (algo == "apex") {  // 2 env steps an update once 500 are stored
      EXPECT_GT(last.at("updates").get<std::int64_t>(), 1000);
      EXPECT_LE(last.at("updates").get<std::int64_t>(), (steps - 500) / 2 + 1);
    } else {  // 8 unrolls an update
      const std::int64_t batch = 8 * perCall;
      EXPECT_GT(last.at("updates").get<std::int64_t>(), steps / batch / 2);
      EXPECT_LE(last.at("updates").get<std::int64_t>(), steps / batch);
    }
    EXPECT_GT(last.at("episodes").get<std::int64_t>(), 10);
    EXPECT_GT(last.at("eval_episodes").get<std::int64_t>(), 0);
    EXPECT_EQ(last.at("actors_restarted"), 0);
    const std::string svg = test::readFile(dir.path() + "/return.svg");
    EXPECT_TRUE(contains(svg, "<svg")) << svg.substr(0, 200);
    EXPECT_TRUE(contains(svg, "greedy evaluation"));
  }
}

TEST_F(RlCli, AKilledRolloutProcessIsReportedAndItsActorRebuilt) {
  test::TempDir dir;
  std::thread killer([&] {
    const std::string pidFile = dir.path() + "/rank-1.pid";
    const std::string metrics = dir.path() + "/metrics.jsonl";
    // Once the learner has reported (it is training), SIGKILL the first rollout process.
    for (int i = 0; i < 1200 && !(std::filesystem::exists(pidFile) && std::filesystem::exists(metrics) &&
                                  std::filesystem::file_size(metrics) > 0);
         ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int pid = 0;
    std::ifstream(pidFile) >> pid;
    if (pid > 0) ::kill(pid, SIGKILL);
  });
  const test::ProgramRun r = rl({"--actors", "2", "--max-env-steps", "6000", "--learning-starts", "500",
                                 "--report-every", "0.3", "--run-dir", dir.path()});
  killer.join();
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\n" << r.out;
  EXPECT_TRUE(contains(r.err, "gyre run: rank 1 on host localhost was killed by SIGKILL")) << r.err;
  EXPECT_TRUE(contains(r.err, "the job goes on without it (--keep-going)")) << r.err;
  EXPECT_TRUE(contains(r.err, "gyre rl: rollout actor 0 was rebuilt (its process was lost) and goes on"))
      << r.err;
  const std::vector<nlohmann::json> records = jsonLines(dir.path() + "/metrics.jsonl");
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().at("actors_restarted"), 1);
  EXPECT_GE(records.back().at("env_steps").get<std::int64_t>(), 6000);  // the rebuilt actor went on
}

// --checkpoint-dir keeps the policy file, --export writes it at the end, --resume starts from it
// (and refuses one of another algorithm).
TEST_F(RlCli, APolicyIsCheckpointedExportedAndResumed) {
  test::TempDir dir;
  const std::string exported = dir.path() + "/policy-export.json";
  const test::ProgramRun first = rl({"--algo", "ppo", "--max-env-steps", "4096", "--checkpoint-dir", dir.path() + "/ck",
                                     "--export", exported, "--run-dir", dir.path() + "/run1"});
  ASSERT_EQ(first.exitCode, 0) << first.describe() << "\n" << first.out;
  EXPECT_TRUE(contains(first.out, "gyre rl: the policy is in " + exported)) << first.out;
  const nlohmann::json policy = nlohmann::json::parse(test::readFile(exported));
  EXPECT_EQ(policy.at("format"), "gyre-policy-1");
  EXPECT_EQ(policy.at("algo"), "ppo");
  EXPECT_EQ(policy.at("outputs"), 3);
  EXPECT_EQ(policy.at("weights").size(), 4u * 128 + 128 + 128 * 128 + 128 + 128 * 3 + 3);
  EXPECT_EQ(test::readFile(dir.path() + "/ck/policy.json"), test::readFile(exported));
  const test::ProgramRun resumed = rl({"--algo", "ppo", "--max-env-steps", "1024", "--resume", dir.path() + "/ck",
                                       "--run-dir", dir.path() + "/run2"});
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe() << "\n" << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "gyre rl: resumed from " + dir.path() + "/ck/policy.json")) << resumed.out;
  const test::ProgramRun other = rl({"--algo", "impala", "--resume", exported, "--run-dir", dir.path() + "/run3"});
  EXPECT_NE(other.exitCode, 0);
  EXPECT_TRUE(contains(other.out + other.err, "holds a policy of algorithm ppo, this run's is impala"))
      << other.out << other.err;
}

TEST_F(RlCli, BadFlagsExit2NamingTheFlag) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--actors", "0"}, "--actors must be an integer in [1, 64]"},
           {{"--algo", "dqn"}, "--algo must be apex, impala or ppo"},
           {{"--env", "pong"}, "--env must be cartpole or acrobot"},
           {{"--lr", "nan"}, "--lr must be a finite number"},
           {{"--learning-starts", "10", "--replay-capacity", "5"}, "--learning-starts"}}) {
    const test::ProgramRun r = rl(args);
    EXPECT_EQ(r.exitCode, 2) << args[0] << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
}

}  // namespace
}  // namespace gyre
