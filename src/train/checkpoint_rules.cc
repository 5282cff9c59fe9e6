#include "train/checkpoint_rules.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "gyre/errors.h"
#include "train/records.h"

namespace gyre::train {
namespace fs = std::filesystem;

namespace {

// The names of `dir`'s complete checkpoints (ckpt-<step> with a manifest), newest first (the
// names sort by step).
std::vector<std::string> completeCheckpoints(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.size() > 5 && name.find_first_not_of("0123456789", 5) == std::string::npos &&
        fs::exists(e.path() / "manifest.json", ec))
      names.push_back(name);
  }
  std::sort(names.rbegin(), names.rend());
  return names;
}

// This run's config (gyre's own text: always readable).
CheckpointConfig currentConfig(const std::string& text) {
  const std::optional<CheckpointConfig> c = parseCheckpointConfig(text);
  if (!c) throw Error("this run's config is not readable: " + text);
  return *c;
}

nlohmann::json orNull(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

std::string newestCompleteCheckpoint(const std::string& dir) {
  const std::vector<std::string> names = completeCheckpoints(dir);
  return names.empty() ? "" : (fs::path(dir) / names.front()).string();
}

std::string savedCheckpointConfig(const std::string& path) {
  std::ifstream in(fs::path(path) / "state.json");
  const nlohmann::json state = nlohmann::json::parse(in, nullptr, false);
  if (!state.is_object() || !state.contains("config") || !state.at("config").is_string()) return "";
  return state.at("config").get<std::string>();
}

std::string savedCheckpointValue(const std::string& path, const std::string& key) {
  std::ifstream in(fs::path(path) / "state.json");
  const nlohmann::json state = nlohmann::json::parse(in, nullptr, false);
  if (!state.is_object() || !state.contains("values") || !state.at("values").is_object()) return "";
  const nlohmann::json& values = state.at("values");
  return values.contains(key) && values.at(key).is_string() ? values.at(key).get<std::string>() : "";
}

std::string checkpointIncompatibility(const std::string& saved, const std::string& current,
                                      const std::string& path) {
  const std::optional<CheckpointConfig> a = parseCheckpointConfig(saved);
  if (!a) return "checkpoint " + path + " was not saved by gyre train (no config in it)";
  const CheckpointConfig b = currentConfig(current);
  // The flags in the order the message names them, each as its JSON value.
  const std::vector<std::tuple<const char*, nlohmann::json, nlohmann::json>> flags = {
      {"--model", a->model, b.model},
      {"--sync-bn", a->syncBn, b.syncBn},
      {"--batch", a->batch, b.batch},
      {"--seed", a->seed, b.seed},
      {"--optimizer", a->optimizer, b.optimizer}};
  for (const auto& [flag, was, is] : flags) {
    if (was == is) continue;
    return "checkpoint " + path + " was saved by a run with " + flag + " " + was.dump() + ", this run has " +
           flag + " " + is.dump() +
           ": resume with the same --model, --sync-bn, --batch, --seed and --optimizer (the number of "
           "workers may change)";
  }
  return "";
}

std::string checkpointLayoutMismatch(const std::string& saved, const std::string& current,
                                     const std::string& path) {
  const std::optional<CheckpointConfig> a = parseCheckpointConfig(saved);
  if (!a) return "";  // checkpointIncompatibility says so
  const CheckpointConfig b = currentConfig(current);
  auto layout = [](const CheckpointConfig& c) {
    return std::to_string(c.world) + " workers with --pp " + std::to_string(c.pp) + " --tp " +
           std::to_string(c.tp) + " --zero " + std::to_string(c.zero);
  };
  if (a->world != b.world || a->pp != b.pp || a->tp != b.tp || a->zero != b.zero)
    return "checkpoint " + path + " holds one part of a model split over " + layout(*a) + "; this run has " +
           layout(b) +
           ": resume it on the same layout";
  auto buckets = [](const CheckpointConfig& c) { return orNull(c.bucketCapMb).dump(); };
  if ((b.zero == 1 || b.zero == 2) && a->bucketCapMb != b.bucketCapMb)
    return "checkpoint " + path +
           " holds one worker's part of the optimizer state of buckets of --bucket-cap-mb " + buckets(*a) +
           "; this run has --bucket-cap-mb " + buckets(b) + ": resume it with the same buckets";
  return "";
}

namespace {

// The config of the newest checkpoint of a layout's directory that is complete: its own (DIR/ckpt-*)
// or its parts' (DIR/rank-<r>/ckpt-*, of a step every rank of the layout that saved it finished;
// names sort by step); "" when there is none.
std::string newestConfigIn(const std::string& dir) {
  std::string newest;
  for (const std::string& name : completeCheckpoints(splitCheckpointDir(dir, 0))) {
    const std::string path = (fs::path(splitCheckpointDir(dir, 0)) / name).string();
    const std::optional<CheckpointConfig> c = parseCheckpointConfig(savedCheckpointConfig(path));
    const int world = c ? c->world : 1;
    bool everywhere = true;
    std::error_code ec;
    for (int r = 1; r < world && everywhere; ++r)
      everywhere = fs::exists(fs::path(splitCheckpointDir(dir, r)) / name / "manifest.json", ec);
    if (everywhere) {
      newest = path;
      break;
    }
  }
  const std::string own = newestCompleteCheckpoint(dir);
  if (newest.empty() || (!own.empty() && fs::path(own).filename() > fs::path(newest).filename())) newest = own;
  return newest.empty() ? "" : savedCheckpointConfig(newest);
}

}  // namespace

bool convertibleLayouts(const std::string& saved, const std::string& current) {
  const std::optional<CheckpointConfig> a = parseCheckpointConfig(saved);
  const std::optional<CheckpointConfig> b = parseCheckpointConfig(current);
  if (!a || !b) return false;
  // Unsplit on both sides: the plain resume takes any number of workers already.
  if (a->zero == 0 && b->zero == 0 && a->pp == 1 && b->pp == 1 && a->tp == 1 && b->tp == 1) return false;
  if (a->world != b->world || a->pp != b->pp || a->tp != b->tp || a->zero != b->zero) return true;
  // ZeRO's buckets elsewhere (its parts are flat shards that say where they lie).
  if ((a->zero == 1 || a->zero == 2) && a->bucketCapMb != b->bucketCapMb) return true;
  // The same workers and stages, cut elsewhere (another --balance or --virtual-stages): each
  // rank's part no longer holds the layers it gets.
  return a->stageLayers && b->stageLayers && *a->stageLayers != *b->stageLayers;
}

SavedLayout savedLayoutOf(const std::string& dir) {
  SavedLayout saved;
  saved.config = newestConfigIn(dir);
  if (!saved.config.empty()) {
    saved.dir = dir;
    return saved;
  }
  // The newest layout set aside (the highest step, then the latest of that step).
  std::error_code ec;
  std::pair<long long, int> best{-1, 0};
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir) / kEarlierLayouts, ec)) {
    long long step = -1;
    int n = 1;
    const std::string name = e.path().filename().string();
    if (std::sscanf(name.c_str(), "step-%lld-%d", &step, &n) < 1 || step < 0) continue;
    const std::string config = newestConfigIn(e.path().string());
    if (config.empty() || std::pair{step, n} < best) continue;
    best = {step, n};
    saved = {e.path().string(), config, true};
  }
  return saved;
}

bool resumesConverted(const SavedLayout& saved, const std::string& current) {
  if (!saved.earlier) return convertibleLayouts(saved.config, current);
  // Set aside by a conversion: any layout a conversion reaches reads it back.
  return parseCheckpointConfig(saved.config) && parseCheckpointConfig(current);
}

std::string setAsideOnlyMessage(const std::string& dir, const std::string& aside) {
  return "--checkpoint-dir " + dir + " holds no checkpoint of its own, only one a conversion set aside (" + aside +
         "), and its configuration cannot be read, so no layout converts it: resume from another directory";
}

std::string splitCheckpointDir(const std::string& dir, int rank) {
  return (fs::path(dir) / ("rank-" + std::to_string(rank))).string();
}

std::string unsplitCheckpointsMessage(const std::string& dir, const std::string& path) {
  return "--checkpoint-dir " + dir + " holds checkpoints of an unsplit model (" + path +
         ", ...): resume them with --pp, --tp or --zero, or choose another "
         "directory";
}

std::string splitCheckpointsMessage(const std::string& dir) {
  return "--checkpoint-dir " + dir +
         " holds checkpoints of a split model (rank-0/, ...: saved with --pp, --tp or --zero): resume them "
         "with the "
         "layout that saved them, or choose another directory";
}

void checkResumeBeforeStart(const TrainOptions& o, int world) {
  if (!o.resume || o.checkpointDir.empty() || o.elastic) return;
  const bool split = o.pp > 1 || o.tp > 1 || zeroStage(o) > 0;
  // A layout the workers convert the checkpoint to: only the flags must match.
  const SavedLayout layout = savedLayoutOf(o.checkpointDir);
  if (resumesConverted(layout, resumeConfig(o, world))) {
    if (std::string why = checkpointIncompatibility(layout.config, resumeConfig(o, world), layout.dir); !why.empty())
      throw InvalidArgument(why);
    return;
  }
  if (layout.earlier) throw InvalidArgument(setAsideOnlyMessage(o.checkpointDir, layout.dir));
  const std::string unsplit = newestCompleteCheckpoint(o.checkpointDir);
  if (split && !unsplit.empty()) throw InvalidArgument(unsplitCheckpointsMessage(o.checkpointDir, unsplit));
  if (!split && fs::exists(splitCheckpointDir(o.checkpointDir, 0)))
    throw InvalidArgument(splitCheckpointsMessage(o.checkpointDir));
  const std::string newest =
      split ? newestCompleteCheckpoint(splitCheckpointDir(o.checkpointDir, 0)) : unsplit;
  if (newest.empty()) return;
  const std::string saved = savedCheckpointConfig(newest);
  if (saved.empty()) return;
  const std::string current = resumeConfig(o, world);
  // The workers' order: a split model's layout first, then the flags.
  if (split)
    if (std::string why = checkpointLayoutMismatch(saved, current, newest); !why.empty())
      throw InvalidArgument(why);
  if (std::string why = checkpointIncompatibility(saved, current, newest); !why.empty())
    throw InvalidArgument(why);
}

CheckpointConfig checkpointConfigOf(const TrainOptions& o, int world) {
  CheckpointConfig c;
  c.model = o.model;
  c.syncBn = o.syncBn;
  c.batch = o.batch;
  c.seed = o.seed;
  c.optimizer = o.optimizer;
  c.world = world;
  c.pp = o.pp;
  c.tp = o.tp;
  c.zero = zeroStage(o);
  c.bucketCapMb = o.bucketCapMb;
  return c;
}

std::string resumeConfig(const TrainOptions& o, int world) {
  return toJson(checkpointConfigOf(o, world)).dump();
}

}  // namespace gyre::train
