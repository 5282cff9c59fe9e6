// The records gyre train writes and its readers read (src/train/records.h): every field back as it
// went out, defaults for what older records lack, and refusals that name the field.
#include <gtest/gtest.h>

#include "gyre/errors.h"
#include "train/records.h"

namespace gyre::train {
namespace {

EpochRecord fullEpoch() {
  EpochRecord e;
  e.epoch = 2;
  e.epochs = 3;
  e.world = 4;
  e.model = "cnn";
  e.batch = 128;
  e.perRankBatch = 32;
  e.lr = 0.2;
  e.compression = "topk:0.01";
  e.loss = 0.5;
  e.testAccuracy = 0.9;
  e.samplesPerS = 1234.5;
  e.seconds = 10;
  e.steps = 100;
  e.timedSteps = 95;
  e.speedup = 1.8;
  e.efficiency = 0.9;
  e.computeS = 7;
  e.communicateS = 2;
  e.waitS = 1;
  e.hiddenS = 0.5;
  e.dataWaitS = 0.25;
  e.bytesPerStep = 4096;
  e.stragglers = std::vector<Straggler>{{1, 40, 2.5}};
  e.droppedGradients = 3;
  e.autotune = AutotuneRecord{8, "ring", 12.5, 4, 40, "cap 8 MiB, ring"};
  e.torchThreads = 1;
  e.blasThreads = 2;
  e.checkpoints = {{50, "/ckpt/ckpt-50", 1000, 0.125}};
  e.mode = "ps:ssp:2";
  e.servers = 2;
  e.staleness = std::vector<std::uint64_t>{5, 3, 1};
  e.clockWaitS = 0.75;
  PipelineRecord p;
  p.pp = 2;
  p.dp = 2;
  p.microBatches = 4;
  p.schedule = "1f1b";
  p.balance = {3, 3};
  p.bubble = 0.3;
  p.idealBubble = 0.2;
  p.stageTimesBubble = 0.25;
  p.stageMs = {1.5, 2.5};
  p.peakActivationBytes = 1 << 20;
  e.pipeline = p;
  e.peakRssBytes = 1 << 30;
  e.modelStateBytes = 1 << 24;
  return e;
}

TEST(TrainRecords, AnEpochComesBackAsItWentOut) {
  const EpochRecord e = fullEpoch();
  const nlohmann::json j = toJson(e);
  EXPECT_EQ(j.at("version"), kRecordVersion);
  const EpochRecord back = epochRecordFromJson(j);
  EXPECT_EQ(toJson(back), toJson(e));
  EXPECT_EQ(back.stragglers->at(0).since, 40);
  EXPECT_EQ(back.pipeline->stageMs, (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(*back.staleness, (std::vector<std::uint64_t>{5, 3, 1}));
}

TEST(TrainRecords, OlderRecordsReadWithDefaults) {
  // Before timed_steps, version and most of the figures: every step was timed.
  const EpochRecord e =
      epochRecordFromJson(nlohmann::json::parse(R"({"epoch":1,"samples_per_s":5,"steps":7})"));
  EXPECT_EQ(e.timedSteps, 7);
  EXPECT_EQ(e.mode, "allreduce");
  EXPECT_FALSE(e.testAccuracy);
  EXPECT_FALSE(e.pipeline);
  EXPECT_EQ(e.world, 1);
}

TEST(TrainRecords, RefusalsNameTheField) {
  auto message = [](const char* text) {
    try {
      epochRecordFromJson(nlohmann::json::parse(text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(R"({"epoch":1,"samples_per_s":"fast"})").find("'samples_per_s'"), std::string::npos);
  EXPECT_NE(message(R"({"samples_per_s":1})").find("no 'epoch'"), std::string::npos);
  EXPECT_NE(message(R"({"version":2,"epoch":1,"samples_per_s":1})").find("record version 2"),
            std::string::npos);
  EXPECT_NE(message("[1]").find("a JSON object"), std::string::npos);
  // A nested record's field is named with the field that holds it.
  const std::string nested = message(R"({"epoch":1,"samples_per_s":1,"stragglers":[{"rank":"two"}]})");
  EXPECT_NE(nested.find("'stragglers'"), std::string::npos) << nested;
  EXPECT_NE(nested.find("'rank'"), std::string::npos) << nested;
  EXPECT_NE(message(R"({"epoch":1,"samples_per_s":1,"checkpoints":{}})").find("not an array"), std::string::npos);
}

TEST(TrainRecords, LinesThatAreNoRecordsAreSkipped) {
  EXPECT_FALSE(parseEpochRecord(""));
  EXPECT_FALSE(parseEpochRecord("epoch 1/3  loss 0.5"));
  EXPECT_FALSE(parseEpochRecord("{not json"));
  EXPECT_FALSE(parseEpochRecord(R"({"step":3,"loss":0.1})"));  // a step record
  EXPECT_TRUE(parseStepRecord(R"({"step":3,"loss":0.1})"));
  EXPECT_THROW(parseStepRecord(R"({"step":"three","loss":0.1})"), Error);
  const std::optional<EvalRecord> eval = parseEvalRecord(toJson(EvalRecord{50, 3.5, 0.8}).dump());
  ASSERT_TRUE(eval);
  EXPECT_EQ(eval->step, 50);
  EXPECT_DOUBLE_EQ(eval->timeS, 3.5);
  EXPECT_DOUBLE_EQ(eval->testAccuracy, 0.8);
}

TEST(TrainRecords, ACheckpointConfigReadsTheFieldsAResumeCompares) {
  CheckpointConfig c;
  c.model = "vit";
  c.batch = 64;
  c.seed = 7;
  c.optimizer = "adam";
  c.world = 4;
  c.pp = 2;
  c.zero = 1;
  c.bucketCapMb = 25;
  c.stageLayers = std::vector<int>{4, 3};
  const std::optional<CheckpointConfig> back = parseCheckpointConfig(toJson(c).dump());
  ASSERT_TRUE(back);
  EXPECT_EQ(toJson(*back), toJson(c));
  // Saved before these fields existed: their defaults.
  const std::optional<CheckpointConfig> old = parseCheckpointConfig(R"({"model":"mlp","batch":64,"seed":0})");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->optimizer, "sgd");
  EXPECT_EQ(old->zero, 0);
  EXPECT_EQ(old->world, 1);
  EXPECT_FALSE(old->bucketCapMb);
  EXPECT_FALSE(parseCheckpointConfig("not json"));
  EXPECT_FALSE(parseCheckpointConfig(R"({"world":"four"})"));
}

}  // namespace
}  // namespace gyre::train
