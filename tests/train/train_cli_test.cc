// `gyre train` as a user runs it: bad flags exit 2 with a message naming the flag, a missing data
// set names the package, and a tiny real job (2 workers, 20 steps) writes its run directory.
// Also gyre_train_worker alone, in plain mode. Skipped when the build has no gyre_train_worker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gyre/torch/data.h"
#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "torch/tensor_checks.h"
#include "train/cli_support.h"
#include "train/models.h"
#include "train/options.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::gyreTool;
using cli::gyreTrain;
using cli::haveData;
using cli::haveTrainer;
using cli::lines;
const auto worker = cli::trainWorker;

test::ProgramRun run(std::vector<std::string> argv) {
  // No GYRE_* variable of the test's own environment reaches the job.
  return test::runProgram({std::move(argv), test::cleanEnvironment()}, cli::kTrainTimeout);
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
      {{"--np", "0"}, "--np must be an integer in [1, 1048576]; got 0"},
      {{"--np", "3", "--batch", "128"}, "must divide evenly among the 3 workers"},
      {{"--epochs", "0"}, "--epochs must be an integer of at least 1"},
      {{"--batch", "0"}, "--batch must be an integer of at least 1"},
      {{"--lr", "0"}, "--lr must be a finite number above 0"},
      {{"--compression", "zip"}, "--compression"},
      {{"--lr-scaling", "cubic"}, "--lr-scaling"},
      {{"--progress", "maybe"}, "--progress"},
      {{"--max-steps", "5", "--skip-steps", "5"}, "--skip-steps 5"},
      {{"--frobnicate"}, "--frobnicate"},
      {{"--mode", "sync"}, "--mode 'sync': allreduce, or a parameter-server mode"},
      {{"--mode", "ps:xyz"}, "--mode 'ps:xyz': the parameter-server modes are ps:bsp, ps:asp and ps:ssp:S"},
      {{"--mode", "ps:ssp:-1"}, "--mode 'ps:ssp:-1'"},
      {{"--mode", "ps:"}, "--mode 'ps:'"},
      {{"--servers", "2"}, "--servers 2 needs a parameter-server --mode"},
      {{"--mode", "ps:asp", "--servers", "0"}, "--servers must be an integer in [1, 1048576]"},
      {{"--mode", "ps:bsp", "--elastic"}, "--mode ps:bsp cannot be combined with --elastic"},
      {{"--mode", "ps:asp", "--compression", "fp16"}, "--compression fp16 does not apply"},
      {{"--mode", "ps:asp", "--checkpoint-dir", "ckpt"},
       "checkpoints (--checkpoint-dir, --resume) are not supported"},
      {{"--np", "2", "--straggler-rank", "2"}, "--straggler-rank 2 is not a rank of the 2 workers"},
      {{"--straggler-factor", "0.5"}, "--straggler-factor must be a finite number of at least 1"},
      {{"--straggler-cpu", "0.5"}, "--straggler-cpu 0.5 needs --straggler-rank"},
      {{"--np", "2", "--straggler-rank", "1", "--straggler-cpu", "0.5", "--straggler-factor", "2"},
       "--straggler-cpu and --straggler-factor are two ways to slow the straggler: give one"},
      {{"--eval-every", "-1"}, "--eval-every must be an integer of at least 0"},
      {{"--shard-optimizer", "--compression", "bf16"}, "--shard-optimizer reduce-scatters float32 gradients"},
      {{"--shard-optimizer", "--mode", "ps:asp"},
       "--shard-optimizer shards the data-parallel optimizer step"},
      {{"--shard-optimizer", "--elastic"}, "--shard-optimizer shards the data-parallel optimizer step"},
      {{"--optimizer", "adagrad"}, "--optimizer"},
      {{"--momentum", "1"}, "--momentum must be below 1 (got 1)"},
      {{"--weight-decay", "-0.1"}, "--weight-decay must"},
      {{"--shard-optimizer", "--optimizer", "lars"}, "--optimizer lars takes the norm of whole layers"},
      {{"--mode", "ps:asp", "--optimizer", "adam"}, "--optimizer adam do not apply"},
      {{"--mode", "ps:asp", "--weight-decay", "0.1"}, "and --weight-decay do not apply"},
      {{"--model", "mlp", "--sync-bn"}, "--sync-bn adds batch normalisation to the cnn"},
      {{"--precision", "fp16"}, "--precision"},
      {{"--straggler-threshold", "1"}, "--straggler-threshold must be above 1, or 0"},
      {{"--np", "2", "--backup-workers", "2"}, "--backup-workers 2 must be fewer than the 2 workers"},
      {{"--autotune", "--shard-optimizer"}, "--autotune tunes the data-parallel gradient buckets"},
      {{"--allreduce", "butterfly"}, "--allreduce"},
      {{"--allreduce", "ring", "--compression", "powersgd:2"},
       "--allreduce ring picks the gradient buckets' allreduce: it does not apply"},
      {{"--autotune", "--compression", "topk:0.01"},
       "--autotune tunes the gradient buckets, which --compression"},
      {{"--backup-workers", "-1"}, "--backup-workers must be an integer of at least 0"},
      {{"--np", "2", "--backup-workers", "1", "--straggler-threshold", "0"},
       "--backup-workers needs --straggler-threshold above 1"},
      {{"--np", "2", "--model", "cnn", "--sync-bn", "--backup-workers", "1"},
       "--backup-workers is for the allreduce --mode, without --plain, --elastic or --sync-bn"},
      {{"--compression", "topk:0"}, "--compression 'topk:0': the top-k ratio must be a number in (0, 1]"},
      {{"--compression", "powersgd:0"}, "the PowerSGD rank must be an integer of at least 1"},
      {{"--compression", "bf16:2"}, "--compression 'bf16:2': expected none, fp16, half, bf16"},
      {{"--model", "cnn", "--compression", "powersgd:123", "--np", "2"},
       "PowerSGD rank 123 compresses none of the gradients: choose a rank of at most 122"},
      {{"--model", "cnn", "--compression", "powersgd:123", "--elastic", "--min-np", "1"},
       "PowerSGD rank 123 compresses none of the gradients"},  // refused before the first membership
      {{"--model", "cnn", "--sync-bn", "--mode", "ps:asp"}, "--sync-bn adds batch normalisation to the cnn"},
  };
  for (const Case& c : cases) {
    const test::ProgramRun r = gyreTrain(c.args);
    EXPECT_EQ(r.exitCode, 2) << c.args.front() << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "' in:\n" << r.err;
  }
}

// The first line of stderr after the program's own prefix ("gyre: invalid argument: " for the
// gyre tool, "gyre train: error: " for the worker): the message itself.
std::string refusalMessage(const test::ProgramRun& r) {
  const std::string line = r.err.substr(0, r.err.find('\n'));
  for (const std::string prefix : {"gyre: invalid argument: ", "gyre train: error: "})
    if (line.starts_with(prefix)) return line.substr(prefix.size());
  return "(unrecognised) " + line;
}

// Whether gyre_train_worker, not only `gyre train`, runs this case: the first flag of each kind
// (its bound, integer or not, with choices or not) and bad value's variant. Both programs parse with
// src/train/options.cc, and every flag's parsing is checked in process by TrainOptions.*; a run of
// the worker costs most of a second of libtorch's start-up, so it runs once per kind.
bool firstOfItsKind(const TrainFlag& f, int variant, std::set<std::string>& seen) {
  const bool integral = !std::holds_alternative<double TrainOptions::*>(f.field);
  return seen
      .insert(std::to_string(int(f.bound)) + (integral ? "i" : "d") + (f.choices.empty() ? "" : "c") +
              std::to_string(variant))
      .second;
}

// Every flag the two programs share, given a value out of its bound or choices, is refused by
// `gyre train` with a message naming it, and gyre_train_worker refuses each kind of them with the
// same message (both come from src/train/options.cc).
TEST_F(TrainCli, EveryInvalidFlagGetsTheSameMessageFromBothPrograms) {
  int compared = 0;
  int workerRuns = 0;
  std::set<std::string> seen;
  for (const TrainFlag& f : trainFlags()) {
    if (f.scope != FlagScope::kBoth || (f.bound == Bound::kNone && f.choices.empty())) continue;
    std::string bad = "bogus";
    if (f.choices.empty())
      bad = f.bound == Bound::kRankOrNone ? "-2"
            : f.bound == Bound::kAtLeast  ? std::to_string(int(f.min) - 1)
                                          : "-1";
    if (f.bound == Bound::kPositive) bad = "0";
    const std::string name(f.name);
    const test::ProgramRun launcher = gyreTrain({name, bad});
    EXPECT_EQ(launcher.exitCode, 2) << name << " " << bad << ": " << launcher.describe();
    const std::string message = refusalMessage(launcher);
    EXPECT_TRUE(message.starts_with(name + " ")) << message;
    ++compared;
    if (!firstOfItsKind(f, 0, seen)) continue;
    const test::ProgramRun alone = run({worker(), name, bad});
    EXPECT_EQ(alone.exitCode, 2) << name << " " << bad << ": " << alone.describe();
    EXPECT_EQ(message, refusalMessage(alone)) << name << " " << bad;
    ++workerRuns;
  }
  EXPECT_GT(compared, 15);
  EXPECT_GE(workerRuns, 4);
}

// The neighbours of a bad number: not finite, too large for the field or for its bound.
TEST_F(TrainCli, EveryNumberFlagRefusesNonFiniteAndOverflowingValues) {
  int compared = 0;
  int workerRuns = 0;
  std::set<std::string> seen;
  for (const TrainFlag& f : trainFlags()) {
    if (f.scope != FlagScope::kBoth || f.bound == Bound::kNone) continue;
    const bool integral = !std::holds_alternative<double TrainOptions::*>(f.field);
    // (NaN, -inf and the rest of the neighbours: TrainOptions.EveryNumberIsFiniteAndInsideItsRange.)
    std::vector<std::string> bad = {integral ? "99999999999999999999" : "inf"};
    if (f.max < numbers::kNoMax) bad.push_back(integral ? std::to_string(std::int64_t(f.max) + 1) : "1e300");
    for (std::size_t variant = 0; variant < bad.size(); ++variant) {
      const std::string& value = bad[variant];
      const std::string name(f.name);
      const test::ProgramRun launcher = gyreTrain({name, value});
      EXPECT_EQ(launcher.exitCode, 2) << name << " " << value << ": " << launcher.describe();
      const std::string message = refusalMessage(launcher);
      EXPECT_TRUE(contains(message, name)) << message;
      ++compared;
      if (!firstOfItsKind(f, int(variant), seen)) continue;
      const test::ProgramRun alone = run({worker(), name, value});
      EXPECT_EQ(alone.exitCode, 2) << name << " " << value << ": " << alone.describe();
      EXPECT_EQ(message, refusalMessage(alone)) << name << " " << value;
      ++workerRuns;
    }
  }
  EXPECT_GT(compared, 20);
  EXPECT_GE(workerRuns, 3);
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
  EXPECT_TRUE(contains(r.err, "gyre train: error: --batch must be an integer of at least 1; got 0")) << r.err;
}

TEST_F(TrainCli, WorkerRefusesBadModes) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--mode", "ps:ssp"}, "--mode 'ps:ssp': the parameter-server modes are"},
      {{"--mode", "hogwild"}, "--mode 'hogwild'"},
      {{"--plain", "--mode", "ps:asp"},
       "--mode ps:asp trains through parameter servers: --plain does not apply"},
      {{"--mode", "ps:bsp", "--compression", "bf16"}, "--compression bf16 does not apply"},
      {{"--mode", "ps:bsp", "--resume", "--checkpoint-dir", "ckpt"}, "checkpoints"},
      {{"--straggler-factor", "0"}, "--straggler-factor must be a finite number of at least 1"},
      {{"--plain", "--shard-optimizer"}, "--shard-optimizer shards the data-parallel optimizer step"},
      {{"--zero", "3", "--eval-every", "5"}, "--eval-every (snapshots of the whole model) is not supported"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {worker()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const test::ProgramRun r = run(argv);
    EXPECT_EQ(r.exitCode, 2) << c.args.back() << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "' in:\n" << r.err;
  }
}

// The parameter-server mode end to end: gyre run --servers 2 beside 2 workers, asynchronous.
TEST_F(TrainCli, TwoWorkersTrainThroughParameterServers) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::string runDir = dir.path() + "/run";
  const test::ProgramRun r =
      gyreTrain({"--model", "mlp", "--np", "2", "--mode", "ps:asp", "--servers", "2", "--epochs", "1",
                 "--max-steps", "20", "--no-eval", "--eval-every", "10", "--run-dir", runDir});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  EXPECT_TRUE(contains(r.out, "parameter servers: 2 (asp)")) << r.out;
  EXPECT_TRUE(contains(r.out, "staleness: mean ")) << r.out;

  const std::vector<std::string> metrics = lines(runDir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const nlohmann::json epoch = nlohmann::json::parse(metrics[0]);
  EXPECT_EQ(epoch.at("mode"), "ps:asp");
  EXPECT_EQ(epoch.at("servers"), 2);
  EXPECT_EQ(epoch.at("steps"), 20);
  std::uint64_t updates = 0;
  for (const auto& count : epoch.at("staleness")) updates += count.get<std::uint64_t>();
  EXPECT_GE(updates, 2u * 20u) << "every worker's every step updates at least one slice";
  // Every step ends in clock() (waiting for its pushes' acknowledgements), inside the epoch's
  // timed loop: some time, less than the epoch's (both averaged over the workers; no --skip-steps).
  EXPECT_GT(epoch.at("clock_wait_s").get<double>(), 0) << epoch;
  EXPECT_LT(epoch.at("clock_wait_s").get<double>(), epoch.at("seconds").get<double>()) << epoch;

  const std::vector<nlohmann::json> evals = cli::jsonLines(runDir + "/eval.jsonl");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0].at("step"), 10);
  EXPECT_EQ(evals[1].at("step"), 20);
  EXPECT_LT(evals[0].at("time_s").get<double>(), evals[1].at("time_s").get<double>());
  EXPECT_GT(evals[1].at("test_acc").get<double>(), 0.1);
}

// --eval-every snapshots the model and evaluates after training: eval.jsonl comes in step order
// with non-decreasing training times, and under allreduce the model of the last step is the one
// the epoch's (sharded, collective) evaluation saw, so the accuracies agree exactly.
TEST_F(TrainCli, EvalEveryEvaluatesSnapshotsOfTheModel) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::string runDir = dir.path() + "/run";
  const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "2", "--epochs", "1", "--max-steps", "20",
                                        "--eval-every", "5", "--run-dir", runDir});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;

  const std::vector<nlohmann::json> evals = cli::jsonLines(runDir + "/eval.jsonl");
  ASSERT_EQ(evals.size(), 4u);
  for (std::size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(evals[i].at("step"), 5 * static_cast<int>(i + 1)) << evals[i];
    const double acc = evals[i].at("test_acc").get<double>();
    EXPECT_TRUE(acc >= 0 && acc <= 1) << evals[i];
    if (i > 0) {
      EXPECT_GE(evals[i].at("time_s").get<double>(), evals[i - 1].at("time_s").get<double>());
    }
  }
  EXPECT_GT(evals[0].at("time_s").get<double>(), 0);

  const std::vector<std::string> metrics = lines(runDir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const nlohmann::json epoch = nlohmann::json::parse(metrics[0]);
  EXPECT_EQ(evals.back().at("test_acc").get<double>(), epoch.at("test_accuracy").get<double>());
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

// The sharded optimizer step is the same arithmetic as the allreduce and the whole step.
TEST_F(TrainCli, ShardedOptimizerStepTrainsTheSameModel) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  std::vector<std::vector<::torch::Tensor>> models;
  for (const char* variant : {"allreduce", "sharded"}) {
    const std::string runDir = dir.path() + "/" + variant;
    std::vector<std::string> args = {"--model", "mlp",       "--np",   "2",         "--max-steps",
                                     "15",      "--no-eval", "--json", "--run-dir", runDir};
    if (std::string(variant) == "sharded") args.push_back("--shard-optimizer");
    const test::ProgramRun r = gyreTrain(args);
    ASSERT_EQ(r.exitCode, 0) << variant << ": " << r.describe() << "\nstdout:\n" << r.out;
    ::torch::nn::Sequential model = makeModel("mlp");
    ::torch::load(model, runDir + "/model.pt");
    std::vector<::torch::Tensor> params;
    for (auto& p : model->parameters()) params.push_back(p.detach().clone());
    models.push_back(params);
  }
  test::expectClose(models[1], models[0], 1e-4, "sharded run");
  std::ifstream in(dir.path() + "/sharded/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_TRUE(config.at("shard_optimizer").get<bool>());
}

// Every --optimizer trains the model (the loss falls over 40 steps of 2 workers), says which it
// used in config.json, and a checkpoint saved by one refuses a resume with another.
TEST_F(TrainCli, EveryOptimizerTrainsAndACheckpointKeepsItsOwn) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  for (const char* optimizer : {"sgd", "adam", "lars", "lamb"}) {
    const std::string runDir = dir.path() + "/" + optimizer;
    // Each rule's own scale of rate: lars's step is --lr · 0.001 · ‖w‖/‖g‖ per layer.
    const std::map<std::string, std::string> rates = {
        {"sgd", "0.05"}, {"adam", "0.005"}, {"lars", "2"}, {"lamb", "0.005"}};
    const std::string lr = rates.at(optimizer);
    const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "40", "--no-eval",
                                          "--optimizer", optimizer, "--lr", lr, "--weight-decay", "0.0001",
                                          "--run-dir", runDir, "--checkpoint-dir", runDir + "/ckpt"});
    ASSERT_EQ(r.exitCode, 0) << optimizer << ": " << r.describe() << "\nstdout:\n" << r.out;
    const std::vector<nlohmann::json> steps = cli::jsonLines(runDir + "/steps.jsonl");
    ASSERT_EQ(steps.size(), 40u) << optimizer;
    auto meanLoss = [&](std::size_t from) {
      double sum = 0;
      for (std::size_t i = from; i < from + 10; ++i) sum += steps[i].at("loss").get<double>();
      return sum / 10;
    };
    EXPECT_LT(meanLoss(30), 0.8 * meanLoss(0)) << optimizer << " did not train";
    std::ifstream in(runDir + "/config.json");
    const nlohmann::json config = nlohmann::json::parse(in);
    EXPECT_EQ(config.at("optimizer"), optimizer);
    EXPECT_EQ(config.at("weight_decay"), 0.0001);
  }
  // Pairs that libtorch itself cannot load (sgd's and adam's options need their own keys) and one
  // it could: the same refusal, before anything is loaded.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"lamb", "sgd"}, {"sgd", "adam"}, {"adam", "lars"}, {"lamb", "lars"}};
  for (const auto& [saved, resumed] : pairs) {
    const test::ProgramRun other =
        gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "40", "--no-eval", "--optimizer", resumed,
                   "--checkpoint-dir", dir.path() + "/" + saved + "/ckpt", "--resume"});
    EXPECT_EQ(other.exitCode, 2) << saved << " -> " << resumed << ": " << other.describe();
    EXPECT_TRUE(contains(other.err, "was saved by a run with --optimizer \"" + saved +
                                        "\", this run has --optimizer \"" + resumed + "\""))
        << other.err;
  }
}

// --sync-bn: the cnn with SyncBatchNorm trains on 2 workers, both ending with the same running
// statistics (rank 0 saves them in the checkpoint, rank 1's are compared through a resume on 1
// worker being accepted and equal), and a checkpoint keeps its --sync-bn.
TEST_F(TrainCli, SyncBatchNormTrainsTheCnnAndACheckpointKeepsIt) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::string runDir = dir.path() + "/run";
  const test::ProgramRun r =
      gyreTrain({"--model", "cnn", "--sync-bn", "--np", "2", "--max-steps", "30", "--batch", "64",
                 "--run-dir", runDir, "--checkpoint-dir", runDir + "/ckpt"});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  const std::vector<nlohmann::json> steps = cli::jsonLines(runDir + "/steps.jsonl");
  ASSERT_EQ(steps.size(), 30u);
  double first = 0, last = 0;
  for (std::size_t i = 0; i < 10; ++i) {
    first += steps[i].at("loss").get<double>();
    last += steps[20 + i].at("loss").get<double>();
  }
  EXPECT_LT(last, 0.8 * first) << "did not train";
  std::ifstream in(runDir + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(in).at("sync_bn"), true);
  const std::vector<nlohmann::json> metrics = cli::jsonLines(runDir + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_GT(metrics[0].at("test_accuracy").get<double>(), 0.5);  // eval mode: the running statistics
  const test::ProgramRun other = gyreTrain({"--model", "cnn", "--np", "2", "--max-steps", "30", "--batch",
                                            "64", "--checkpoint-dir", runDir + "/ckpt", "--resume"});
  EXPECT_EQ(other.exitCode, 2) << other.describe();
  EXPECT_TRUE(contains(other.err, "was saved by a run with --sync-bn true, this run has --sync-bn false"))
      << other.err;
}

// What each --compression puts on the wire per step (metrics.jsonl's bytes_per_step): the mlp's
// 535,818 float32 gradients are 2,143,272 bytes, fp16 half of that, top-k 1% 1% of the entries as
// value and index, PowerSGD rank 4 its P and Q plus the biases; and each of them trains.
TEST_F(TrainCli, CompressionShrinksTheBytesPerStep) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::vector<std::pair<std::string, double>> expected = {
      {"none", 2143272},
      {"fp16", 1071636},
      {"topk:0.01", 8 * 5358},
      {"powersgd:4", 4 * (4 * (784 + 512 + 512 + 256 + 256 + 10) + 512 + 256 + 10)}};
  for (const auto& [compression, bytes] : expected) {
    const std::string runDir = dir.path() + "/" + compression.substr(0, compression.find(':'));
    const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "30", "--no-eval",
                                          "--compression", compression, "--run-dir", runDir});
    ASSERT_EQ(r.exitCode, 0) << compression << ": " << r.describe();
    const std::vector<nlohmann::json> metrics = cli::jsonLines(runDir + "/metrics.jsonl");
    ASSERT_EQ(metrics.size(), 1u);
    EXPECT_EQ(metrics[0].at("bytes_per_step").get<double>(), bytes) << compression;
    EXPECT_EQ(metrics[0].at("compression"), compression);
    const std::vector<nlohmann::json> steps = cli::jsonLines(runDir + "/steps.jsonl");
    ASSERT_EQ(steps.size(), 30u);
    EXPECT_LT(steps[29].at("loss").get<double>(), steps[0].at("loss").get<double>()) << compression;
  }
}

// --precision bf16: the forward pass under CPU autocast. The losses differ from fp32's (bfloat16
// products) but only by rounding, training goes on, and config.json records it.
TEST_F(TrainCli, Bf16AutocastTrainsWithinRoundingOfFp32) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  std::map<std::string, std::vector<nlohmann::json>> steps;
  for (const char* precision : {"fp32", "bf16"}) {
    const std::string runDir = dir.path() + "/" + precision;
    const test::ProgramRun r = gyreTrain({"--model", "cnn", "--np", "2", "--max-steps", "30", "--batch", "64",
                                          "--no-eval", "--precision", precision, "--run-dir", runDir});
    ASSERT_EQ(r.exitCode, 0) << precision << ": " << r.describe();
    steps[precision] = cli::jsonLines(runDir + "/steps.jsonl");
    ASSERT_EQ(steps[precision].size(), 30u);
    std::ifstream in(runDir + "/config.json");
    EXPECT_EQ(nlohmann::json::parse(in).at("precision"), precision);
  }
  const double fp32 = steps["fp32"][0].at("loss").get<double>(),
               bf16 = steps["bf16"][0].at("loss").get<double>();
  EXPECT_NE(fp32, bf16) << "the first step's loss should show bfloat16 rounding";
  EXPECT_NEAR(fp32, bf16, 0.02);
  EXPECT_LT(steps["bf16"][29].at("loss").get<double>(), 0.8 * bf16) << "bf16 did not train";
}

// Straggler detection: a worker made 3x slower (--straggler-rank) is named within 20 steps, on
// stdout and in metrics.jsonl; with --straggler-threshold 0 nobody is, and stragglers is null.
TEST_F(TrainCli, AStragglerIsNamedWithinTwentySteps) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const test::ProgramRun r =
      gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "40", "--no-eval", "--straggler-rank", "1",
                 "--straggler-factor", "3", "--run-dir", dir.path() + "/slow"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const auto at = r.out.find("straggler: rank 1 is ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto step = r.out.find(", at step ", at);
  ASSERT_NE(step, std::string::npos) << r.out;
  EXPECT_LE(std::stoi(r.out.substr(step + 10)), 20) << r.out;
  EXPECT_EQ(r.out.find("straggler: rank 0"), std::string::npos) << r.out;
  const std::vector<nlohmann::json> metrics = cli::jsonLines(dir.path() + "/slow/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  ASSERT_EQ(metrics[0].at("stragglers").size(), 1u) << metrics[0].dump();
  EXPECT_EQ(metrics[0].at("stragglers")[0].at("rank"), 1);
  EXPECT_GT(metrics[0].at("stragglers")[0].at("factor").get<double>(), 1.5);
  const test::ProgramRun off =
      gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "20", "--no-eval", "--straggler-rank", "1",
                 "--straggler-factor", "3", "--straggler-threshold", "0", "--run-dir", dir.path() + "/off"});
  ASSERT_EQ(off.exitCode, 0) << off.describe();
  EXPECT_EQ(off.out.find("straggler: rank 1 is "), std::string::npos) << off.out;
  EXPECT_TRUE(cli::jsonLines(dir.path() + "/off/metrics.jsonl")[0].at("stragglers").is_null());
}

// Backup workers: a worker made 4x slower skips its computation from step 11 on, except every
// 10th step (measured again); the epoch reports the gradients left out, and training goes on.
TEST_F(TrainCli, BackupWorkersLeaveTheSlowWorkersGradientsOut) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "3", "--batch", "96", "--max-steps", "40",
                                        "--no-eval", "--straggler-rank", "2", "--straggler-factor", "4",
                                        "--backup-workers", "1", "--run-dir", dir.path()});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "gradients (backup workers)")) << r.out;
  const std::vector<nlohmann::json> metrics = cli::jsonLines(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  const auto dropped = metrics[0].at("dropped_gradients").get<std::int64_t>();
  EXPECT_GE(dropped, 18) << metrics[0].dump();  // at most 27: steps 11-19, 21-29, 31-39
  EXPECT_LE(dropped, 27) << metrics[0].dump();
  const std::vector<nlohmann::json> steps = cli::jsonLines(dir.path() + "/steps.jsonl");
  ASSERT_EQ(steps.size(), 40u);
  for (const nlohmann::json& step : steps) EXPECT_TRUE(std::isfinite(step.at("loss").get<double>())) << step;
  EXPECT_LT(steps[39].at("loss").get<double>(), steps[0].at("loss").get<double>());
  std::ifstream in(dir.path() + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(in).at("backup_workers"), 1);
}

// --autotune changes how the gradients travel, not what they are: with 2 workers every
// algorithm adds the same two numbers, so the losses equal those of a run without it, bit for
// bit, while the buckets move from cap to cap; the choice is printed and kept in metrics.jsonl.
TEST_F(TrainCli, AutotuneChoosesAndRecordsWithoutChangingTheTraining) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  std::vector<std::vector<std::string>> losses;
  for (const char* tune : {"off", "on"}) {
    std::vector<std::string> args = {"--model",   "cnn",    "--np", "2",         "--max-steps",          "40",
                                     "--no-eval", "--seed", "3",    "--run-dir", dir.path() + "/" + tune};
    if (std::string(tune) == "on") args.push_back("--autotune");
    const test::ProgramRun r = gyreTrain(args);
    ASSERT_EQ(r.exitCode, 0) << tune << ": " << r.describe();
    std::vector<std::string> run;
    for (const nlohmann::json& step : cli::jsonLines(dir.path() + "/" + tune + "/steps.jsonl"))
      run.push_back(step.at("loss").dump());
    losses.push_back(run);
    const nlohmann::json autotune =
        cli::jsonLines(dir.path() + "/" + tune + "/metrics.jsonl")[0].at("autotune");
    if (std::string(tune) == "off") {
      EXPECT_TRUE(autotune.is_null()) << autotune;
      continue;
    }
    EXPECT_TRUE(contains(r.out, "autotune: bucket cap ")) << r.out;
    ASSERT_TRUE(autotune.is_object()) << autotune;
    EXPECT_GE(autotune.at("trials").get<int>(), 3) << autotune;  // 25 and 1 MiB differ for the cnn
    EXPECT_EQ(autotune.at("steps").get<int>(), 5 * autotune.at("trials").get<int>()) << autotune;
    EXPECT_GT(autotune.at("step_ms").get<double>(), 0) << autotune;
  }
  ASSERT_EQ(losses[0].size(), 40u);
  EXPECT_EQ(losses[0], losses[1]);
}

// The loader's threads change when a batch is assembled, never which: the same steps, bit for bit,
// with the batches assembled inline or on 3 threads (and, over 2 epochs with a mid-epoch restart of
// the order, the second epoch's too). The epoch line and metrics.jsonl show the data wait.
TEST_F(TrainCli, DataWorkersLeaveTheRunUnchanged) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  std::vector<std::vector<std::string>> steps;
  for (const char* workers : {"0", "3"}) {
    const std::string runDir = dir.path() + "/workers-" + workers;
    const test::ProgramRun r = gyreTrain({"--model", "mlp", "--np", "2", "--epochs", "2", "--max-steps", "12",
                                          "--no-eval", "--data-workers", workers, "--run-dir", runDir});
    ASSERT_EQ(r.exitCode, 0) << workers << ": " << r.describe() << "\nstdout:\n" << r.out;
    EXPECT_TRUE(contains(r.out, "step: data ")) << r.out;
    steps.push_back(lines(runDir + "/steps.jsonl"));
    ASSERT_EQ(steps.back().size(), 24u);
    for (const nlohmann::json& epoch : cli::jsonLines(runDir + "/metrics.jsonl")) {
      const double data = epoch.at("data_wait_s").get<double>();
      EXPECT_GE(data, 0) << epoch;
      EXPECT_LE(data, epoch.at("compute_s").get<double>()) << epoch;
    }
    std::ifstream in(runDir + "/config.json");
    EXPECT_EQ(nlohmann::json::parse(in).at("data_workers"), std::stoi(workers));
  }
  EXPECT_EQ(steps[0], steps[1]);
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
