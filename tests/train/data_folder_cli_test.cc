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
  // How a client prepares inputs: the training split's figures and the classes' names.
  EXPECT_EQ(config.at("normalize").at("mean").size(), 1u);
  EXPECT_GT(config.at("normalize").at("std").at(0).get<double>(), 0);
  ASSERT_EQ(config.at("class_names").size(), 10u);
  EXPECT_EQ(config.at("class_names").at(0), "0-t-shirt-top");
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
  EXPECT_TRUE(contains(noTest.err, "holds none of the layouts gyre reads")) << noTest.err;

  // A truncated image: named, the job fails; with --skip-bad-records it is left out and listed.
  const std::string image = fm + "/train/3-dress/00003.png";
  ASSERT_TRUE(fs::exists(image));
  fs::resize_file(image, 30);
  const test::ProgramRun bad = train({"--data", fm});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_TRUE(contains(bad.err, image + ": ")) << bad.err;
  const test::ProgramRun skipped = train({"--data", fm, "--skip-bad-records", "1"});
  EXPECT_EQ(skipped.exitCode, 0) << skipped.describe();
  EXPECT_TRUE(contains(skipped.out, "left out 1 bad sample(s)")) << skipped.out;
  EXPECT_TRUE(contains(skipped.out, image + ": ")) << skipped.out;

  // A test split whose classes differ from the training split's.
  fs::rename(fm + "/test/9-ankle-boot", fm + "/test/9-boots");
  const test::ProgramRun classes = train({"--data", fm, "--skip-bad-records", "1"});
  EXPECT_NE(classes.exitCode, 0);
  EXPECT_TRUE(contains(classes.err, "they must be the same")) << classes.err;

  // The vit takes only Fashion-MNIST's shape: 9 classes are refused, with the reason.
  fs::remove_all(fm + "/test/9-boots");
  fs::remove_all(fm + "/train/9-ankle-boot");
  const test::ProgramRun vit = train({"--data", fm, "--skip-bad-records", "1"}, "vit");
  EXPECT_NE(vit.exitCode, 0);
  EXPECT_TRUE(contains(vit.err, "the vit takes 1x28x28 images in 10 classes, not 1x28x28 images in 9 classes"))
      << vit.err;
}

// `gyre data pack` and `gyre data info`, run as a user runs them.
test::ProgramRun gyreData(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {test::gyreTool(), "data"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::runProgram({argv, test::cleanEnvironment()}, std::chrono::seconds(120));
}

TEST_F(DataFolderCli, PackedRecordsTrainExactlyAsTheirFolder) {
  const std::string packed = dir_.path() + "/packed";
  const test::ProgramRun pack = gyreData({"pack", exported(), packed, "--shard-size", "100KB"});
  ASSERT_EQ(pack.exitCode, 0) << pack.describe() << pack.err;
  EXPECT_TRUE(contains(pack.out, "train: 1500 records in ")) << pack.out;
  const test::ProgramRun info = gyreData({"info", packed, "--verify"});
  EXPECT_EQ(info.exitCode, 0) << info.err;
  EXPECT_TRUE(contains(info.out, "every record read and its CRC checked")) << info.out;
  // The same steps on the folder and on its records: the same model, to the bit (the records'
  // figures are the folder's; the batches are the same samples).
  for (const std::string& data : {exported(), packed}) {
    const test::ProgramRun r =
        cli::gyreTrain({"--model", "mlp", "--np", "2", "--epochs", "1", "--max-steps", "8", "--progress", "off",
                        "--data", data, "--run-dir", dir_.path() + "/run-" + fs::path(data).filename().string()});
    ASSERT_EQ(r.exitCode, 0) << r.describe() << r.err;
  }
  const auto bytes = [](const std::string& path) {
    std::string data(fs::exists(path) ? fs::file_size(path) : 0, '\0');
    std::ifstream(path, std::ios::binary).read(data.data(), static_cast<std::streamsize>(data.size()));
    return data;
  };
  const std::string fromFolder = bytes(dir_.path() + "/run-fm/model.pt");
  EXPECT_FALSE(fromFolder.empty());
  EXPECT_EQ(fromFolder, bytes(dir_.path() + "/run-packed/model.pt"));

  // Packing again into it is refused; a size that is none is a usage error.
  const test::ProgramRun again = gyreData({"pack", exported(), packed});
  EXPECT_EQ(again.exitCode, 1);
  EXPECT_TRUE(contains(again.err, packed + " exists and is not an empty folder")) << again.err;
  const test::ProgramRun size = gyreData({"pack", exported(), dir_.path() + "/x", "--shard-size", "big"});
  EXPECT_EQ(size.exitCode, 2);
  EXPECT_TRUE(contains(size.err, "--shard-size big is not a size")) << size.err;
}

TEST_F(DataFolderCli, ADamagedRecordIsNamedOrSkippedAndReportedAtTheEpochsEnd) {
  const std::string packed = dir_.path() + "/packed";
  ASSERT_EQ(gyreData({"pack", exported(), packed}).exitCode, 0);
  const std::string shard = packed + "/train-00000.gyrec";
  {  // the last byte of record 5's image
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    std::streamoff at = 8;
    for (int r = 0; r <= 5; ++r) {
      f.seekg(at);
      unsigned char head[4];
      f.read(reinterpret_cast<char*>(head), 4);
      const std::streamoff length = head[0] | head[1] << 8 | head[2] << 16 | head[3] << 24;
      if (r == 5) {
        f.seekp(at + 8 + length - 1);
        f.put('\x33');
      }
      at += 8 + length;
    }
  }
  const auto train = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {"--model", "mlp", "--np", "2", "--epochs", "2", "--progress", "off",
                                     "--data", packed, "--run-dir", dir_.path() + "/run"};
    args.insert(args.end(), more.begin(), more.end());
    return cli::gyreTrain(args);
  };
  const std::string why = shard + ", record 5: fails its CRC check (damaged)";
  const test::ProgramRun strict = train({});
  EXPECT_NE(strict.exitCode, 0);
  EXPECT_TRUE(contains(strict.err, why)) << strict.err;
  const test::ProgramRun lenient = train({"--skip-bad-records", "1"});
  ASSERT_EQ(lenient.exitCode, 0) << lenient.describe() << lenient.err;
  // Said once, at the end of the first epoch that met it, by the worker whose batch held it,
  // however often later epochs meet it again.
  EXPECT_TRUE(contains(lenient.out, "left out 1 bad sample(s) (1 in all, --skip-bad-records 1):\n  " + why))
      << lenient.out;
  std::size_t reports = 0;
  for (std::size_t at = lenient.out.find("gyre train: epoch "); at != std::string::npos;
       at = lenient.out.find("gyre train: epoch ", at + 1))
    ++reports;
  EXPECT_EQ(reports, 1u) << lenient.out;
}

TEST_F(DataFolderCli, TablesTrainTheMlpAndAreRefusedWhereImagesAreNeeded) {
  // Three clusters of four features, a name for each.
  const std::string tables = dir_.path() + "/tables";
  fs::create_directories(tables);
  const char* names[] = {"setosa", "versicolor", "virginica"};
  for (const auto& [split, rows] : {std::pair{"train", 300}, std::pair{"test", 90}}) {
    std::ofstream out(tables + "/" + split + ".csv");
    out << "a,b,species,c,d\n";
    for (int i = 0; i < rows; ++i) {
      const int k = i % 3;
      const auto v = [&](int j) { return k * 2.0 + j * 0.1 + ((i * 7 + j * 3) % 10) * 0.05; };
      out << v(0) << "," << v(1) << "," << names[k] << "," << v(2) << "," << v(3) << "\n";
    }
  }
  const auto train = [&](std::vector<std::string> more, const std::string& model = "mlp",
                         const std::string& label = "species") {
    std::vector<std::string> args = {"--model", model, "--np", "2", "--epochs", "3", "--batch", "16",
                                     "--progress", "off", "--data", tables, "--label-column", label,
                                     "--run-dir", dir_.path() + "/run-" + model};
    args.insert(args.end(), more.begin(), more.end());
    return cli::gyreTrain(args);
  };
  const test::ProgramRun mlp = train({});
  ASSERT_EQ(mlp.exitCode, 0) << mlp.describe() << mlp.err;
  const auto epochs = cli::jsonLines(dir_.path() + "/run-mlp/metrics.jsonl");
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_GT(epochs[2].at("test_accuracy").get<double>(), 0.9) << mlp.out;
  const test::ProgramRun cnn = train({}, "cnn");
  EXPECT_NE(cnn.exitCode, 0);
  EXPECT_TRUE(contains(cnn.err, "needs images of at least 4x4")) << cnn.err;
  const test::ProgramRun augment = train({"--augment", "flip"});
  EXPECT_NE(augment.exitCode, 0);
  EXPECT_TRUE(contains(augment.err, "--augment needs images")) << augment.err;
  const test::ProgramRun label = train({}, "mlp", "kind");
  EXPECT_NE(label.exitCode, 0);
  EXPECT_TRUE(contains(label.err, "has no label column 'kind'")) << label.err;
}

}  // namespace
}  // namespace gyre::train
