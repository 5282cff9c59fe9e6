// What the trainer shows and writes: the epoch line leaves out what is unknown, the JSON line
// carries nulls for it, the progress bar redraws in place and erases itself, and run files are
// replaced whole, with errors that name the path.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/files.h"
#include "gyre/errors.h"
#include "support/ranks.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/run_files.h"

namespace gyre::train {
namespace {

EpochRecord sample() {
  EpochRecord r;
  r.epoch = 1;
  r.epochs = 3;
  r.world = 2;
  r.model = "cnn";
  r.batch = 128;
  r.perRankBatch = 64;
  r.lr = 0.05;
  r.compression = "none";
  r.loss = 0.43121;
  r.samplesPerS = 2093.4;
  r.seconds = 28.7;
  r.steps = 468;
  r.timedSteps = 468;
  r.computeS = 9.1;
  r.communicateS = 0.8;
  r.waitS = 0.2;
  r.hiddenS = 0.6;
  r.dataWaitS = 0.05;  // part of computeS
  r.torchThreads = 1;
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EpochLine, ShowsWhatIsKnown) {
  EpochRecord r = sample();
  r.testAccuracy = 0.8712;
  r.speedup = 1.86;
  r.efficiency = 0.93;
  EXPECT_EQ(formatEpochLine(r),
            "epoch 1/3  loss 0.4312  test acc 87.12%  2093 samples/s  speedup 1.86  efficiency 0.93  "
            "step: data 0.5% compute 97% comm 9% (hidden 6%) wait 2%");
}

TEST(EpochLine, LeavesOutWhatIsUnknown) {
  EXPECT_EQ(
      formatEpochLine(sample()),
      "epoch 1/3  loss 0.4312  2093 samples/s  step: data 0.5% compute 97% comm 9% (hidden 6%) wait 2%");
  EpochRecord plain = sample();
  plain.plain = true;
  EXPECT_EQ(formatEpochLine(plain), "epoch 1/3  loss 0.4312  2093 samples/s");
}

TEST(EpochJson, CarriesEveryFieldWithNullsForTheUnknown) {
  const nlohmann::json j = nlohmann::json::parse(toJsonLine(sample()));
  for (const char* field :
       {"epoch",    "epochs",      "world",          "model",         "batch",         "per_rank_batch",
        "lr",       "compression", "loss",           "test_accuracy", "samples_per_s", "seconds",
        "steps",    "speedup",     "efficiency",     "compute_s",     "communicate_s", "wait_s",
        "hidden_s", "data_wait_s", "bytes_per_step", "torch_threads", "blas_threads"})
    EXPECT_TRUE(j.contains(field)) << field;
  EXPECT_TRUE(j.at("test_accuracy").is_null());
  EXPECT_TRUE(j.at("speedup").is_null());
  EXPECT_TRUE(j.at("efficiency").is_null());
  EXPECT_TRUE(j.at("blas_threads").is_null());
  EXPECT_EQ(j.at("world"), 2);
  EXPECT_EQ(j.at("per_rank_batch"), 64);
  EXPECT_EQ(j.at("data_wait_s"), 0.05);
  EXPECT_EQ(toJsonLine(sample()).find('\n'), std::string::npos);
}

TEST(EpochJson, CarriesTheParameterServerFigures) {
  const nlohmann::json allreduce = nlohmann::json::parse(toJsonLine(sample()));
  EXPECT_EQ(allreduce.at("mode"), "allreduce");
  for (const char* field : {"servers", "staleness", "clock_wait_s"})
    EXPECT_TRUE(allreduce.at(field).is_null()) << field;
  EpochRecord r = sample();
  r.mode = "ps:ssp:2";
  r.servers = 2;
  r.staleness = trimTrailingZeros({5, 0, 3, 0, 0});
  r.clockWaitS = 0.25;
  const nlohmann::json j = nlohmann::json::parse(toJsonLine(r));
  EXPECT_EQ(j.at("mode"), "ps:ssp:2");
  EXPECT_EQ(j.at("servers"), 2);
  EXPECT_EQ(j.at("staleness"), nlohmann::json::array({5, 0, 3}));
  EXPECT_EQ(j.at("clock_wait_s"), 0.25);
}

TEST(Staleness, SummarisesTheHistogram) {
  std::vector<std::uint64_t> histogram(65, 0);  // WorkerStats::kMaxStaleness + 1
  histogram[0] = 20;
  histogram[1] = 70;
  histogram[3] = 9;
  histogram[4] = 1;
  EXPECT_EQ(formatStaleness(histogram), "staleness: mean 1.01, p50 1, p99 3, max 4 over 100 updates");
  histogram[64] = 1;  // 64 and above
  EXPECT_EQ(formatStaleness(histogram), "staleness: mean 1.63, p50 1, p99 4, max 64+ over 101 updates");
  EXPECT_EQ(formatStaleness(std::vector<std::uint64_t>(65, 0)), "staleness: no updates");
  EXPECT_EQ(trimTrailingZeros({0, 0}), std::vector<std::uint64_t>{});
}

TEST(ProgressBar, DrawsInPlaceAndErasesItself) {
  test::TempDir dir;
  const std::string path = dir.path() + "/bar";
  std::FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar(true, out);
    bar.start(2, 3, 10, 128);
    for (int step = 1; step <= 10; ++step) bar.update(step, 0.5);
    bar.finish();
  }
  std::fclose(out);
  const std::string text = readFile(path);
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 2/3 [####################] 10/10 loss 0.500 "), std::string::npos) << text;
  // The last drawing is spaces over the bar, then '\r'.
  ASSERT_GE(text.size(), 2u);
  EXPECT_EQ(text.back(), '\r');
  EXPECT_EQ(text[text.size() - 2], ' ');
}

TEST(ProgressBar, DisabledDrawsNothing) {
  test::TempDir dir;
  const std::string path = dir.path() + "/bar";
  std::FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar(false, out);
    bar.start(1, 1, 5, 128);
    for (int step = 1; step <= 5; ++step) bar.update(step, 0.5);
    bar.finish();
  }
  std::fclose(out);
  EXPECT_EQ(readFile(path), "");
  EXPECT_FALSE(progressEnabled("off"));
  EXPECT_TRUE(progressEnabled("on"));
  EXPECT_THROW(progressEnabled("sometimes"), InvalidArgument);
}

TEST(RunFiles, ReplaceTheFileWholeAndLeaveNoTemporary) {
  test::TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  files::writeAtomically(path, "one\n");
  files::writeAtomically(path, "one\ntwo\n");
  EXPECT_EQ(readFile(path), "one\ntwo\n");
  EXPECT_FALSE(std::filesystem::exists(files::temporaryPath(path)));
}

TEST(RunFiles, ErrorsNameThePath) {
  test::TempDir dir;
  const std::string path = dir.path() + "/missing/metrics.jsonl";
  try {
    files::writeAtomically(path, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + path + ": No such file or directory"),
              std::string::npos)
        << e.what();
  }
  const std::string file = dir.path() + "/file";
  files::writeAtomically(file, "x");
  try {
    createRunDirectory(file + "/run");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the run directory " + file + "/run"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gyre::train
