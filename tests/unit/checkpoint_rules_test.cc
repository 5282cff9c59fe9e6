// Which checkpoints a run may resume (src/train/checkpoint_rules.h), as `gyre train --resume`
// checks them before any worker starts: another model, batch, seed or optimizer, another layout
// of a split model, a split directory for an unsplit run and the reverse, each refused with the
// workers' message; a matching or unreadable checkpoint, or none, left to the workers.
#include "train/checkpoint_rules.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::train {
namespace {

namespace fs = std::filesystem;

// A complete checkpoint (manifest and state) of a run with `config`, at `step` under `dir`.
void writeCheckpoint(const fs::path& dir, int step, const nlohmann::json& config) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%012d", step);
  fs::create_directories(dir / name);
  std::ofstream(dir / name / "manifest.json") << "{}";
  std::ofstream(dir / name / "state.json") << nlohmann::json{{"config", config.dump()}}.dump();
}

nlohmann::json configOf(const TrainOptions& o, int world) {
  return nlohmann::json::parse(resumeConfig(o, world));
}

std::string refusal(const TrainOptions& o, int world) {
  try {
    checkResumeBeforeStart(o, world);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointRules, AnUnsplitRunResumesOnAnyWorldWithTheSameFlags) {
  test::TempDir dir;
  TrainOptions o;
  o.checkpointDir = dir.path();
  o.resume = true;
  writeCheckpoint(dir.path(), 4, configOf(o, 2));
  writeCheckpoint(dir.path(), 8, configOf(o, 2));
  EXPECT_EQ(refusal(o, 2), "");
  EXPECT_EQ(refusal(o, 3), "");  // the number of workers may change
  TrainOptions adam = o;
  adam.optimizer = "adam";
  EXPECT_EQ(refusal(adam, 2),
            "checkpoint " + dir.path() +
                "/ckpt-000000000008 was saved by a run with --optimizer "
                "\"sgd\", this run has --optimizer \"adam\": resume with the same --model, --sync-bn, "
                "--batch, --seed and --optimizer (the number of workers may change)");
  TrainOptions fresh = adam;
  fresh.resume = false;
  EXPECT_EQ(refusal(fresh, 2), "");  // not resuming: another check's business
  TrainOptions pipeline = o;
  pipeline.pp = 2;
  EXPECT_EQ(refusal(pipeline, 2), "");  // the workers convert it
  TrainOptions split = o;
  split.tp = 2;
  EXPECT_EQ(refusal(split, 2), "");  // the workers cut it into shares
  split.zero = 1;  // and ZeRO's flats over a share's parameters
  EXPECT_EQ(refusal(split, 4), "");
}

TEST(CheckpointRules, APipelinesCheckpointIsConvertedToAnotherLayout) {
  TrainOptions pp2;
  pp2.pp = 2;
  TrainOptions tp2 = pp2, zero1 = pp2, one, zeroTp;
  tp2.tp = 2;
  zeroTp.tp = 2;
  zeroTp.zero = 1;
  zero1.zero = 1;
  const std::string saved = resumeConfig(pp2, 2);
  EXPECT_FALSE(convertibleLayouts(saved, resumeConfig(pp2, 2)));  // the same layout: no conversion
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(pp2, 4)));   // another number of replicas
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(one, 1)));
  EXPECT_TRUE(convertibleLayouts(resumeConfig(one, 3), saved));
  EXPECT_FALSE(convertibleLayouts(resumeConfig(one, 1), resumeConfig(one, 3)));  // unsplit: the plain resume
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(tp2, 4)));  // stages cut into shares
  EXPECT_TRUE(convertibleLayouts(resumeConfig(zero1, 2), resumeConfig(one, 1)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(zero1, 2)));  // the same stages, now ZeRO's
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(zeroTp, 4)));
  EXPECT_FALSE(convertibleLayouts(resumeConfig(zeroTp, 4), resumeConfig(zeroTp, 4)));
  EXPECT_FALSE(convertibleLayouts("", saved));
  // The same workers and stages cut elsewhere: each part no longer holds its rank's layers.
  nlohmann::json cut = nlohmann::json::parse(saved), other = cut;
  cut["stage_layers"] = {3, 3};
  other["stage_layers"] = {2, 4};
  EXPECT_TRUE(convertibleLayouts(cut.dump(), other.dump()));
  EXPECT_FALSE(convertibleLayouts(cut.dump(), cut.dump()));
  // Before a worker starts: only the flags must match.
  test::TempDir dir;
  pp2.checkpointDir = dir.path();
  pp2.resume = true;
  writeCheckpoint(splitCheckpointDir(dir.path(), 0), 8, configOf(pp2, 2));
  writeCheckpoint(splitCheckpointDir(dir.path(), 1), 8, configOf(pp2, 2));
  EXPECT_EQ(savedLayoutOf(dir.path()).config, configOf(pp2, 2).dump());
  EXPECT_EQ(savedLayoutOf(dir.path()).dir, dir.path());
  EXPECT_FALSE(savedLayoutOf(dir.path()).earlier);
  TrainOptions onOne = pp2;
  onOne.pp = 1;
  EXPECT_EQ(refusal(onOne, 1), "");
  EXPECT_EQ(refusal(pp2, 4), "");
  onOne.seed = pp2.seed + 1;
  EXPECT_NE(refusal(onOne, 1).find("was saved by a run with --seed"), std::string::npos) << refusal(onOne, 1);
  TrainOptions withTp = pp2;
  withTp.tp = 2;
  EXPECT_EQ(refusal(withTp, 4), "");
  withTp.pp = 1;
  withTp.zero = 1;
  EXPECT_EQ(refusal(withTp, 4), "");
}

TEST(CheckpointRules, ALayoutSetAsideIsResumedUntilTheNewOneSaves) {
  test::TempDir dir;
  TrainOptions pp2;
  pp2.pp = 2;
  pp2.checkpointDir = dir.path();
  pp2.resume = true;
  const fs::path aside = fs::path(dir.path()) / kEarlierLayouts;
  writeCheckpoint(aside / "step-4" / "rank-0", 4, configOf(pp2, 2));
  writeCheckpoint(aside / "step-8", 8, configOf(pp2, 1));
  for (int r = 0; r < 4; ++r) writeCheckpoint(aside / "step-8-2" / ("rank-" + std::to_string(r)), 8, configOf(pp2, 4));
  writeCheckpoint(aside / "step-12" / "rank-0", 12, configOf(pp2, 2));  // rank 1 never finished it
  fs::create_directories(splitCheckpointDir(dir.path(), 0));  // the converting run's, still empty
  const SavedLayout saved = savedLayoutOf(dir.path());
  EXPECT_TRUE(saved.earlier);
  EXPECT_EQ(saved.dir, (aside / "step-8-2").string());
  EXPECT_EQ(saved.config, configOf(pp2, 4).dump());
  // Even the layout that saved it converts it back (its parts are no longer where it looks).
  EXPECT_TRUE(resumesConverted(saved, resumeConfig(pp2, 4)));
  EXPECT_EQ(refusal(pp2, 4), "");
  // ZeRO takes it too, and --tp, and ZeRO beside --pp or --tp.
  TrainOptions zero1 = pp2;
  zero1.pp = 1;
  zero1.zero = 1;
  EXPECT_TRUE(resumesConverted(saved, resumeConfig(zero1, 2)));
  EXPECT_EQ(refusal(zero1, 2), "");
  zero1.pp = 2;
  EXPECT_TRUE(resumesConverted(saved, resumeConfig(zero1, 4)));
  EXPECT_EQ(refusal(zero1, 4), "");
  TrainOptions tp2 = pp2;
  tp2.pp = 1;
  tp2.tp = 2;
  EXPECT_EQ(refusal(tp2, 2), "");
  tp2.zero = 1;
  EXPECT_EQ(refusal(tp2, 4), "");
  // One whose config cannot be read is not converted, and the run is told why.
  test::TempDir unreadable;
  TrainOptions any = pp2;
  any.checkpointDir = unreadable.path();
  const fs::path unreadableAside = fs::path(unreadable.path()) / kEarlierLayouts / "step-4";
  writeCheckpoint(unreadableAside, 4, nlohmann::json{{"model", 3}});
  EXPECT_EQ(refusal(any, 2), setAsideOnlyMessage(unreadable.path(), unreadableAside.string()));
  // A step that only some of the new layout's parts finished is not one yet.
  writeCheckpoint(splitCheckpointDir(dir.path(), 0), 12, configOf(pp2, 2));
  EXPECT_TRUE(savedLayoutOf(dir.path()).earlier);
  // Once every part of the new layout has saved, its own checkpoints are the ones.
  writeCheckpoint(splitCheckpointDir(dir.path(), 1), 12, configOf(pp2, 2));
  EXPECT_FALSE(savedLayoutOf(dir.path()).earlier);
  EXPECT_EQ(savedLayoutOf(dir.path()).dir, dir.path());
  EXPECT_EQ(savedLayoutOf(dir.path()).config, configOf(pp2, 2).dump());
  // The newest of DIR's own and its parts' counts.
  TrainOptions one = pp2;
  one.pp = 1;
  writeCheckpoint(dir.path(), 16, configOf(one, 1));
  EXPECT_EQ(savedLayoutOf(dir.path()).config, configOf(one, 1).dump());
}

// A --tp layout's parts are shares of the vit's tensors: they convert to another world, --tp or
// --pp, back to one whole model, and to ZeRO beside --tp.
TEST(CheckpointRules, ATensorParallelCheckpointIsConvertedToAnotherLayout) {
  test::TempDir dir;
  TrainOptions o;
  o.checkpointDir = dir.path();
  o.resume = true;
  o.model = "vit";
  o.tp = 2;
  writeCheckpoint(splitCheckpointDir(dir.path(), 0), 8, configOf(o, 2));
  writeCheckpoint(splitCheckpointDir(dir.path(), 1), 8, configOf(o, 2));
  EXPECT_EQ(refusal(o, 2), "");
  EXPECT_EQ(refusal(o, 4), "");
  EXPECT_TRUE(convertibleLayouts(resumeConfig(o, 2), resumeConfig(o, 4)));
  TrainOptions unsplit = o;
  unsplit.tp = 1;
  EXPECT_EQ(refusal(unsplit, 1), "");
  TrainOptions zero = o;
  zero.zero = 1;
  EXPECT_EQ(refusal(zero, 4), "");
  unsplit.seed = o.seed + 1;
  EXPECT_NE(refusal(unsplit, 1).find("was saved by a run with --seed"), std::string::npos) << refusal(unsplit, 1);
  // Saved with ZeRO beside --tp: its own layout takes it, and one whole model.
  test::TempDir zeroDir;
  zero.checkpointDir = zeroDir.path();
  for (int r = 0; r < 4; ++r) writeCheckpoint(splitCheckpointDir(zeroDir.path(), r), 8, configOf(zero, 4));
  EXPECT_EQ(refusal(zero, 4), "");
  TrainOptions whole = zero;
  whole.tp = 1;
  whole.zero = 0;
  EXPECT_EQ(refusal(whole, 1), "");
  // Parts whose config cannot be read convert to nothing: an unsplit run is told they are split.
  test::TempDir unreadable;
  whole.checkpointDir = unreadable.path();
  writeCheckpoint(splitCheckpointDir(unreadable.path(), 0), 8, nlohmann::json{{"model", 3}});
  EXPECT_EQ(refusal(whole, 1), splitCheckpointsMessage(unreadable.path()));
  // An incomplete newest part (no manifest yet) is passed over; an unreadable config is left to
  // the workers.
  fs::create_directories(fs::path(splitCheckpointDir(dir.path(), 0)) / "ckpt-000000000012");
  EXPECT_EQ(refusal(o, 2), "");
  std::ofstream(fs::path(splitCheckpointDir(dir.path(), 0)) / "ckpt-000000000012" / "manifest.json") << "{}";
  EXPECT_EQ(refusal(o, 4), "");
}

// ZeRO's parts say where their shards lie: any other world, stage or buckets converts them, and
// they convert to any layout, ZeRO beside --pp or --tp included.
TEST(CheckpointRules, AZeroCheckpointIsConvertedToAnyLayout) {
  TrainOptions zero2;
  zero2.zero = 2;
  TrainOptions zero3 = zero2, one, buckets = zero2, tp2, zeroPp = zero2;
  zero3.zero = 3;
  buckets.bucketCapMb = zero2.bucketCapMb * 2;
  tp2.tp = 2;
  zeroPp.pp = 2;
  const std::string saved = resumeConfig(zero2, 2);
  EXPECT_FALSE(convertibleLayouts(saved, resumeConfig(zero2, 2)));  // the same layout: its own parts
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(zero2, 4)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(zero3, 2)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(buckets, 2)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(one, 1)));
  EXPECT_TRUE(convertibleLayouts(resumeConfig(one, 3), saved));
  EXPECT_FALSE(convertibleLayouts(resumeConfig(zero3, 2), resumeConfig(zero3, 2)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(tp2, 2)));
  EXPECT_TRUE(convertibleLayouts(saved, resumeConfig(zeroPp, 4)));
  EXPECT_TRUE(convertibleLayouts(resumeConfig(zeroPp, 4), resumeConfig(one, 1)));
  EXPECT_FALSE(convertibleLayouts(resumeConfig(zeroPp, 4), resumeConfig(zeroPp, 4)));
  nlohmann::json cut = nlohmann::json::parse(resumeConfig(zeroPp, 4)), other = cut;
  cut["stage_layers"] = {3, 3};
  other["stage_layers"] = {2, 4};
  EXPECT_TRUE(convertibleLayouts(cut.dump(), other.dump()));  // the stages cut elsewhere

  test::TempDir dir;
  zero2.checkpointDir = dir.path();
  zero2.resume = true;
  writeCheckpoint(splitCheckpointDir(dir.path(), 0), 8, configOf(zero2, 2));
  writeCheckpoint(splitCheckpointDir(dir.path(), 1), 8, configOf(zero2, 2));
  EXPECT_EQ(refusal(zero2, 2), "");
  EXPECT_EQ(refusal(zero2, 4), "");
  TrainOptions unsplit = zero2;
  unsplit.zero = 0;
  EXPECT_EQ(refusal(unsplit, 1), "");
  unsplit.seed = zero2.seed + 1;
  EXPECT_NE(refusal(unsplit, 1).find("was saved by a run with --seed"), std::string::npos) << refusal(unsplit, 1);
  TrainOptions withPp = zero2;
  withPp.pp = 2;
  EXPECT_EQ(refusal(withPp, 4), "");
}

}  // namespace
}  // namespace gyre::train
