// `gyre tune` with its built-in trials (gyre train on the mlp), as a user runs it: the issue's own
// invocation finishes, prints the best configuration and writes results.jsonl; promoted ASHA
// trials resume from their gyre train checkpoints (epochs continue, nothing is trained twice); a
// trial's worker SIGKILLed mid-run is retried from its checkpoint and the experiment's best result
// is the same as without the kill; gyre train flags that gyre train refuses stop the experiment
// before any trial. Skipped when the build has no gyre_train_worker or the data set is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/programs.h"
#include "train/cli_support.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::gyreTool;
using cli::jsonLines;

class TuneCli : public cli::TrainerTest {
 protected:
  void SetUp() override {
    cli::TrainerTest::SetUp();
    if (!IsSkipped() && !cli::haveData())
      GTEST_SKIP() << "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  }
  test::ProgramRun tune(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {gyreTool(), "tune", "--progress", "off"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::runProgram({argv, test::cleanEnvironment()}, cli::kTrainTimeout);
  }
  static nlohmann::json summary(const test::ProgramRun& run) {
    std::istringstream in(run.out);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty() && line.front() == '{') last = line;
    return nlohmann::json::parse(last, nullptr, false);
  }
};

// The invocation, word for word (with --max-t 3 to keep it short, and --json).
TEST_F(TuneCli, AshaOverGyreTrainTrialsFindsAndReportsTheBest) {
  const std::string dir = path("exp");
  const test::ProgramRun run = tune({"--model",     "mlp",
                                     "--max-steps", "60",
                                     "--param",     "lr=loguniform:0.001:0.3",
                                     "--param",     "batch=choice:32,64,128",
                                     "--samples",   "9",
                                     "--scheduler", "asha",
                                     "--slots",     "2",
                                     "--metric",    "accuracy",
                                     "--mode",      "max",
                                     "--dir",       dir,
                                     "--max-t",     "3",
                                     "--json"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_TRUE(contains(run.out, "best trial ")) << run.out;
  const nlohmann::json s = summary(run);
  EXPECT_EQ(s.at("trials"), 9);
  EXPECT_EQ(s.at("errors"), 0);
  EXPECT_GT(s.at("best_accuracy").get<double>(), 0.6);
  // Rungs 1 and 3: at most 9 + 2 x floor(9 / 3) epochs with no mispromotion; a promoted trial
  // resumed from its checkpoint, so no epoch was trained twice.
  EXPECT_LT(s.at("worker_iterations").get<double>(), 27);
  const std::vector<nlohmann::json> results = jsonLines(dir + "/results.jsonl");
  EXPECT_GE(results.size(), 9u);
  for (const auto& r : results) EXPECT_TRUE(r.at("metrics").contains("test_accuracy")) << r;
  const int best = s.at("best_trial").get<int>();
  const std::vector<nlohmann::json> epochs =
      jsonLines(dir + "/trials/" + std::to_string(best) + "/metrics.jsonl");
  for (std::size_t i = 0; i < epochs.size(); ++i) EXPECT_EQ(epochs[i].at("epoch"), static_cast<int>(i) + 1);
  EXPECT_TRUE(std::filesystem::exists(s.at("best_checkpoint").get<std::string>()));
}

TEST_F(TuneCli, AKilledTrialWorkerIsRetriedAndTheBestIsTheSame) {
  const std::vector<std::string> common = {
      "--model", "mlp", "--max-steps", "150", "--checkpoint-every", "150", "--param", "lr=grid:0.03,0.1",
      "--max-t", "3",   "--slots",     "2",   "--max-failures",     "1",   "--json"};
  std::vector<std::string> clean = common;
  clean.insert(clean.end(), {"--dir", path("clean")});
  const test::ProgramRun a = tune(clean);
  ASSERT_EQ(a.exitCode, 0) << a.describe();
  // The same, with trial 0's worker SIGKILLed once its first epoch is recorded.
  std::string script = gyreTool() + " tune --progress off --dir " + path("killed");
  for (const std::string& w : common) script += " " + w;
  script += " & pid=$!; m=" + path("killed") + "/trials/0/metrics.jsonl; " +
            "while kill -0 $pid && [ ! -s $m ]; do sleep 0.05; done; " +
            "pkill -9 -f '[g]yre_train_worker.*" + path("killed") + "/trials/0' ; wait $pid";
  const test::ProgramRun b =
      test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, cli::kTrainTimeout);
  ASSERT_EQ(b.exitCode, 0) << b.describe();
  EXPECT_TRUE(contains(b.out, "trial 0 failed: run ")) << b.out;
  const nlohmann::json sa = summary(a), sb = summary(b);
  EXPECT_EQ(sb.at("errors"), 0);
  EXPECT_EQ(sb.at("best_config"), sa.at("best_config"));
  EXPECT_DOUBLE_EQ(sb.at("best_accuracy").get<double>(), sa.at("best_accuracy").get<double>());
}

TEST_F(TuneCli, TrainFlagsGyreTrainRefusesStopTheExperimentFirst) {
  test::ProgramRun run =
      tune({"--model", "mlp", "--max-stepz", "60", "--param", "lr=uniform:0.01:0.1", "--dir", path("a")});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(contains(run.err, "--max-stepz")) << run.err;
  run = tune({"--model", "mlp", "--param", "lrate=uniform:0.01:0.1", "--dir", path("b")});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(contains(run.err, "--param lrate: parameter lrate is not a gyre train flag it can set"))
      << run.err;
  run = tune({"--model", "mlp", "--epochs", "3", "--np", "1", "--param", "lr=uniform:0.01:0.1", "--run-dir",
              "x", "--dir", path("c")});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(contains(run.err, "--run-dir is set by gyre tune for each trial")) << run.err;
  run = tune({"--model", "mlp", "--param", "lr=uniform:0.01:0.1", "--param", "batch=choice:32,64",
              "--scheduler", "pbt", "--dir", path("d")});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(contains(run.err, "pbt would mutate batch")) << run.err;
  EXPECT_FALSE(std::filesystem::exists(path("a/trials/0")));
}

}  // namespace
}  // namespace gyre::train
