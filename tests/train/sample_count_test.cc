// Each sample of an epoch is trained exactly once, through a restart from a checkpoint and through
// an elastic membership change mid-epoch, counted from what the workers say they trained
// (GYRE_SAMPLE_LOG): a step replayed after the fault trains the same samples as before it, and
// the epoch's steps together hold every sample of the epoch once. On record shards (gyre data
// pack) of a small Fashion-MNIST export. Skipped without gyre_train_worker or the data set.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"

namespace gyre::train {
namespace {

namespace fs = std::filesystem;
using cli::contains;

constexpr int kImages = 1500;  // exported; 23 steps of 64 per epoch

class SampleCountTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cli::haveTrainer() || !cli::haveData()) return;
    data_ = new test::TempDir;
    const test::ProgramRun exported = test::runProgram(
        {{"/usr/bin/python3", test::sourceDir() + "/scripts/export-fashion-mnist.py", data_->path() + "/fm",
          "--limit", std::to_string(kImages)},
         test::cleanEnvironment()},
        std::chrono::seconds(120));
    packed_ = new test::ProgramRun(test::runProgram(
        {{test::gyreTool(), "data", "pack", data_->path() + "/fm", data_->path() + "/packed", "--shard-size", "64KB"},
         test::cleanEnvironment()},
        std::chrono::seconds(120)));
    if (exported.exitCode != 0) packed_->err = exported.describe() + exported.err;
  }
  static void TearDownTestSuite() {
    delete packed_;
    delete data_;
    packed_ = nullptr;
    data_ = nullptr;
  }
  void SetUp() override {
    if (!cli::haveTrainer()) GTEST_SKIP() << "no gyre_train_worker in this build";
    if (!cli::haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    ASSERT_EQ(packed_->exitCode, 0) << packed_->describe() << packed_->err;
  }

  test::ProgramRun train(const std::vector<std::string>& more) const {
    std::vector<std::string> argv = {test::gyreTool(), "train",     "--model",    "mlp",
                                     "--np",           "2",         "--epochs",   "2",
                                     "--batch",        "64",        "--threads",  "1",
                                     "--no-eval",      "--progress", "off",       "--data",
                                     data_->path() + "/packed",     "--run-dir",  dir_.path() + "/run"};
    argv.insert(argv.end(), more.begin(), more.end());
    test::Environment env = test::cleanEnvironment();
    env["GYRE_SAMPLE_LOG"] = dir_.path() + "/samples";
    return test::runProgram({argv, env}, cli::kTrainTimeout);
  }

  // Every (step, part) of every worker process's log: the samples of each must agree wherever it
  // was trained (before and after a fault); each epoch's steps must then hold every one of its
  // samples once. Returns how many (step, part) were trained more than once (replayed).
  int expectEachSampleOncePerEpoch(std::int64_t partsPerStep) const {
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> trained;  // (step, part)
    std::map<std::int64_t, int> epochOf;
    int replayed = 0;
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir_.path())) {
      if (entry.path().filename().string().rfind("samples.", 0) != 0) continue;
      ++files;
      for (const nlohmann::json& line : cli::jsonLines(entry.path().string())) {
        const auto key = std::pair{line.at("step").get<std::int64_t>(), line.at("part").get<std::int64_t>()};
        const auto samples = line.at("samples").get<std::vector<std::int64_t>>();
        epochOf[key.first] = line.at("epoch").get<int>();
        const auto [at, inserted] = trained.emplace(key, samples);
        if (inserted) continue;
        ++replayed;
        EXPECT_EQ(at->second, samples) << "step " << key.first << ", part " << key.second << " trained other samples again";
      }
    }
    EXPECT_GE(files, 2);
    for (int epoch : {1, 2}) {
      std::multiset<std::int64_t> seen;
      std::int64_t steps = 0;
      for (const auto& [key, samples] : trained) {
        if (epochOf[key.first] != epoch) continue;
        if (key.second == 0) ++steps;
        seen.insert(samples.begin(), samples.end());
      }
      EXPECT_EQ(steps, kImages / 64) << "epoch " << epoch;
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), steps * 64) << "epoch " << epoch;
      EXPECT_EQ(static_cast<std::int64_t>(std::set<std::int64_t>(seen.begin(), seen.end()).size()),
                static_cast<std::int64_t>(seen.size()))
          << "epoch " << epoch << ": a sample trained twice";
      for (std::int64_t s : seen) EXPECT_TRUE(s >= 0 && s < kImages) << s;
    }
    std::int64_t parts = 0;
    for (const auto& [key, samples] : trained) parts += key.first == 1 ? 1 : 0;
    EXPECT_EQ(parts, partsPerStep);
    return replayed;
  }

  static test::TempDir* data_;
  static test::ProgramRun* packed_;
  test::TempDir dir_;
};

test::TempDir* SampleCountTest::data_ = nullptr;
test::ProgramRun* SampleCountTest::packed_ = nullptr;

TEST_F(SampleCountTest, ARestartFromACheckpointMidEpochTrainsEachSampleOnce) {
  // Killed after step 33 (epoch 2's tenth), restarted from the checkpoint of step 30.
  const test::ProgramRun r = train({"--checkpoint-dir", dir_.path() + "/ckpt", "--checkpoint-every", "10",
                                    "--max-restarts", "1", "--fault-at-step", "33", "--fault-rank", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << r.out << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "injecting a fault")) << r.out + r.err;
  EXPECT_GT(expectEachSampleOncePerEpoch(2), 0) << "no step was replayed: the fault did not strike";
}

TEST_F(SampleCountTest, AnElasticMembershipChangeMidEpochTrainsEachSampleOnce) {
  // Worker 1 lost after step 33: the survivor rolls back to the commit of step 32 and trains both
  // shards of each step alone (until a replacement joins).
  const test::ProgramRun r = train({"--elastic", "--min-np", "1", "--commit-every", "4", "--max-restarts", "1",
                                    "--fault-at-step", "33", "--fault-rank", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << r.out << r.err;
  EXPECT_TRUE(contains(r.out + r.err, "elastic: membership 2: 1 worker")) << r.out + r.err;
  EXPECT_GT(expectEachSampleOncePerEpoch(2), 0) << "no step was replayed: the fault did not strike";
}

}  // namespace
}  // namespace gyre::train
