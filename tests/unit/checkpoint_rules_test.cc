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
  TrainOptions split = o;
  split.pp = 2;
  EXPECT_EQ(refusal(split, 2), unsplitCheckpointsMessage(dir.path(), dir.path() + "/ckpt-000000000008"));
}

TEST(CheckpointRules, ASplitRunResumesOnlyOnItsLayout) {
  test::TempDir dir;
  TrainOptions o;
  o.checkpointDir = dir.path();
  o.resume = true;
  o.zero = 2;
  writeCheckpoint(splitCheckpointDir(dir.path(), 0), 8, configOf(o, 2));
  writeCheckpoint(splitCheckpointDir(dir.path(), 1), 8, configOf(o, 2));
  EXPECT_EQ(refusal(o, 2), "");
  EXPECT_NE(
      refusal(o, 4).find("holds one part of a model split over 2 workers with --pp 1 --tp 1 --zero 2; this "
                         "run has 4 workers with --pp 1 --tp 1 --zero 2: resume it on the same layout"),
      std::string::npos)
      << refusal(o, 4);
  TrainOptions buckets = o;
  buckets.bucketCapMb = o.bucketCapMb * 2;
  EXPECT_NE(refusal(buckets, 2).find("resume it with the same buckets"), std::string::npos);
  TrainOptions unsplit = o;
  unsplit.zero = 0;
  EXPECT_EQ(refusal(unsplit, 2), splitCheckpointsMessage(dir.path()));
  // An incomplete newest part (no manifest yet) is passed over; an unreadable config is left to
  // the workers.
  fs::create_directories(fs::path(splitCheckpointDir(dir.path(), 0)) / "ckpt-000000000012");
  EXPECT_EQ(refusal(o, 2), "");
  std::ofstream(fs::path(splitCheckpointDir(dir.path(), 0)) / "ckpt-000000000012" / "manifest.json") << "{}";
  EXPECT_EQ(refusal(o, 4), "");
}

}  // namespace
}  // namespace gyre::train
