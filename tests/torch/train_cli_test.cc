// `gyre train` as a user runs it: bad flags exit 2 with a message naming the flag, a missing data
// set names the package, and a tiny real job (2 workers, 20 steps) writes its run directory.
// Also gyre_train_worker alone, in plain mode. Skipped when the build has no gyre_train_worker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "torch/cli_support.h"
#include "train/fashion_mnist.h"
#include "train/models.h"

namespace gyre::train {
namespace {

constexpr auto kTimeout = std::chrono::seconds(600);
using cli::contains;
using cli::gyreTool;
using cli::haveData;
using cli::haveTrainer;
using cli::lines;
const auto worker = cli::trainWorker;

test::ProgramRun run(std::vector<std::string> argv) {
  // No GYRE_* variable of the test's own environment reaches the job.
  return test::runProgram({std::move(argv), test::cleanEnvironment()}, kTimeout);
}

test::ProgramRun gyreTrain(std::vector<std::string> args) {
  args.insert(args.begin(), {gyreTool(), "train"});
  return run(std::move(args));
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveTrainer()) GTEST_SKIP() << "no " << worker() << " in this build";
  }
};

TEST_F(TrainCli, BadFlagsExit2NamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model", "resnet"}, "--model"},
      {{"--np", "0"}, "--np must be at least 1"},
      {{"--np", "3", "--batch", "128"}, "must divide evenly among the 3 workers"},
      {{"--epochs", "0"}, "--epochs must be at least 1"},
      {{"--batch", "0"}, "--batch must be at least 1"},
      {{"--lr", "0"}, "--lr must be positive"},
      {{"--compression", "zip"}, "--compression"},
      {{"--lr-scaling", "cubic"}, "--lr-scaling"},
      {{"--progress", "maybe"}, "--progress"},
      {{"--max-steps", "5", "--skip-steps", "5"}, "--skip-steps 5"},
      {{"--frobnicate"}, "--frobnicate"},
  };
  for (const Case& c : cases) {
    const test::ProgramRun r = gyreTrain(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args.front() << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "' in:\n" << r.err;
  }
}

TEST_F(TrainCli, MissingDataSetNamesThePackage) {
  test::TempDir dir;
  const test::ProgramRun r =
      gyreTrain({"--np", "1", "--data-dir", dir.path() + "/none", "--run-dir", dir.path() + "/run"});
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "sudo apt-get install dataset-fashion-mnist")) << r.err;
}

TEST_F(TrainCli, WorkerRejectsBadFlags) {
  const test::ProgramRun r = run({worker(), "--plain", "--batch", "0"});
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "gyre train: error: --batch must be at least 1")) << r.err;
}

TEST_F(TrainCli, TwoWorkersTrainAndWriteTheRunDirectory) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::string runDir = dir.path() + "/run";
  const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "2", "--epochs", "1", "--max-steps", "20",
                                        "--no-eval", "--run-dir", runDir});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  EXPECT_TRUE(contains(r.out, "epoch 1/1  loss ")) << r.out;

  const std::vector<std::string> metrics = lines(runDir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const nlohmann::json epoch = nlohmann::json::parse(metrics[0]);
  EXPECT_EQ(epoch.at("world"), 2);
  EXPECT_EQ(epoch.at("model"), "mlp");
  EXPECT_EQ(epoch.at("batch"), 128);
  EXPECT_EQ(epoch.at("per_rank_batch"), 64);
  EXPECT_EQ(epoch.at("steps"), 20);
  EXPECT_FALSE(epoch.at("plain").get<bool>());
  EXPECT_TRUE(epoch.at("test_accuracy").is_null());
  EXPECT_GT(epoch.at("samples_per_s").get<double>(), 0);
  EXPECT_GT(epoch.at("loss").get<double>(), 0);

  EXPECT_TRUE(std::filesystem::exists(runDir + "/config.json"));
  ASSERT_TRUE(std::filesystem::exists(runDir + "/model.pt"));
  ::torch::nn::Sequential model = makeModel("mlp");
  ::torch::load(model, runDir + "/model.pt");  // a model libtorch can read back
  for (const auto& entry : std::filesystem::directory_iterator(runDir))
    EXPECT_FALSE(contains(entry.path().filename().string(), ".tmp.")) << "left behind: " << entry.path();
}

TEST_F(TrainCli, PlainWorkerTrainsWithoutGyre) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const test::ProgramRun r = run({worker(), "--plain", "--model", "mlp", "--max-steps", "5", "--no-eval",
                                  "--progress", "off", "--json", "--run-dir", dir.path()});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::vector<std::string> metrics = lines(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const nlohmann::json epoch = nlohmann::json::parse(metrics[0]);
  EXPECT_TRUE(epoch.at("plain").get<bool>());
  EXPECT_EQ(epoch.at("world"), 1);
  EXPECT_EQ(epoch.at("steps"), 5);
  EXPECT_TRUE(contains(r.out, metrics[0])) << "--json prints the metrics line:\n" << r.out;
}

}  // namespace
}  // namespace gyre::train
