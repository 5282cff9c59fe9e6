// `gyre train --data FOLDER` as a user runs it: Fashion-MNIST exported as PNGs by
// scripts/export-fashion-mnist.py (a small part of it), trained by 2 workers; the run records the
// model's shape, and gyre serve's loader could rebuild it. Bad folders, images and models end
// with a message naming the file or folder, without a hang. Skipped without gyre_train_worker or
// the data set.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"

namespace gyre::train {
namespace {

namespace fs = std::filesystem;
using cli::contains;

class DataFolderCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cli::haveTrainer() || !cli::haveData()) return;
    folder_ = new test::TempDir;
    exported_ = new test::ProgramRun(test::runProgram(
        {{"/usr/bin/python3", test::sourceDir() + "/scripts/export-fashion-mnist.py", folder_->path() + "/fm",
          "--limit", "1500"},
         test::cleanEnvironment()},
        std::chrono::seconds(120)));
  }
  static void TearDownTestSuite() {
    delete exported_;
    delete folder_;
    exported_ = nullptr;
    folder_ = nullptr;
  }
  void SetUp() override {
    if (!cli::haveTrainer()) GTEST_SKIP() << "no gyre_train_worker in this build";
    if (!cli::haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    ASSERT_EQ(exported_->exitCode, 0) << exported_->describe();
  }
  // A copy of the exported set to spoil.
  std::string copy() const {
    fs::copy(folder_->path() + "/fm", dir_.path() + "/fm", fs::copy_options::recursive);
    return dir_.path() + "/fm";
  }
  static std::string exported() { return folder_->path() + "/fm"; }

  static test::TempDir* folder_;
  static test::ProgramRun* exported_;
  test::TempDir dir_;
};

test::TempDir* DataFolderCli::folder_ = nullptr;
test::ProgramRun* DataFolderCli::exported_ = nullptr;

TEST_F(DataFolderCli, TwoWorkersTrainOnTheExportedPngs) {
  const std::string runDir = dir_.path() + "/run";
  const test::ProgramRun r = cli::gyreTrain({"--model", "cnn", "--np", "2", "--epochs", "2", "--batch", "64",
                                             "--progress", "off", "--data", exported(), "--run-dir", runDir});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\n" << r.out;
  const auto epochs = cli::jsonLines(runDir + "/metrics.jsonl");
  ASSERT_EQ(epochs.size(), 2u);
  // 1,500 images of 10 classes, 2 epochs: well above chance (10%).
  EXPECT_GT(epochs[1].at("test_accuracy").get<double>(), 0.4) << r.out;
  std::ifstream in(runDir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config.at("input_shape"), nlohmann::json({1, 28, 28}));
  EXPECT_EQ(config.at("classes"), 10);
  EXPECT_EQ(config.at("data"), nlohmann::json(exported()));
}

TEST_F(DataFolderCli, BadFoldersAndImagesAreNamed) {
  const std::string fm = copy();
  const auto train = [&](std::vector<std::string> more, const std::string& model = "mlp") {
    std::vector<std::string> args = {"--model",     model, "--np",       "1",   "--epochs",  "1",
                                     "--max-steps", "2",   "--progress", "off", "--run-dir", dir_.path() + "/run"};
    args.insert(args.end(), more.begin(), more.end());
    return cli::gyreTrain(args);
  };

  // No test folder: said before any worker starts.
  const test::ProgramRun noTest = train({"--data", dir_.path()});
  EXPECT_NE(noTest.exitCode, 0);
  EXPECT_TRUE(contains(noTest.err, "needs a train folder and a test (or val) folder")) << noTest.err;

  // A truncated image: named, the job fails; with --skip-bad-records it is left out and listed.
  const std::string image = fm + "/train/3-dress/00003.png";
  ASSERT_TRUE(fs::exists(image));
  fs::resize_file(image, 30);
  const test::ProgramRun bad = train({"--data", fm});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_TRUE(contains(bad.err, image + ": ")) << bad.err;
  const test::ProgramRun skipped = train({"--data", fm, "--skip-bad-records", "1"});
  EXPECT_EQ(skipped.exitCode, 0) << skipped.describe();
  EXPECT_TRUE(contains(skipped.out, "left out 1 unreadable image(s)")) << skipped.out;
  EXPECT_TRUE(contains(skipped.out, image + ": ")) << skipped.out;

  // A test split whose classes differ from the training split's.
  fs::rename(fm + "/test/9-ankle-boot", fm + "/test/9-boots");
  const test::ProgramRun classes = train({"--data", fm, "--skip-bad-records", "1"});
  EXPECT_NE(classes.exitCode, 0);
  EXPECT_TRUE(contains(classes.err, "they must be the same folders")) << classes.err;

  // The vit takes only Fashion-MNIST's shape: 9 classes are refused, with the reason.
  fs::remove_all(fm + "/test/9-boots");
  fs::remove_all(fm + "/train/9-ankle-boot");
  const test::ProgramRun vit = train({"--data", fm, "--skip-bad-records", "1"}, "vit");
  EXPECT_NE(vit.exitCode, 0);
  EXPECT_TRUE(contains(vit.err, "the vit takes 1x28x28 images in 10 classes, not 1x28x28 images in 9 classes"))
      << vit.err;
}

}  // namespace
}  // namespace gyre::train
