#include "train/checkpoint_rules.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "gyre/errors.h"

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

std::string checkpointIncompatibility(const std::string& saved, const std::string& current,
                                      const std::string& path) {
  const nlohmann::json a = nlohmann::json::parse(saved, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(current);
  if (!a.is_object()) return "checkpoint " + path + " was not saved by gyre train (no config in it)";
  for (const char* key : {"model", "sync_bn", "batch", "seed", "optimizer"}) {
    nlohmann::json was = a.value(key, nlohmann::json());
    // Saved before the flag existed: its default.
    if (was.is_null() && std::string_view(key) == "optimizer") was = "sgd";
    if (was.is_null() && std::string_view(key) == "sync_bn") was = false;
    if (was == b.at(key)) continue;
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return "checkpoint " + path + " was saved by a run with --" + flag + " " + was.dump() +
           ", this run has --" + flag + " " + b.at(key).dump() +
           ": resume with the same --model, --sync-bn, --batch, --seed and --optimizer (the number of "
           "workers may "
           "change)";
  }
  return "";
}

std::string checkpointLayoutMismatch(const std::string& saved, const std::string& current,
                                     const std::string& path) {
  const nlohmann::json a = nlohmann::json::parse(saved, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(current);
  if (!a.is_object()) return "";      // checkpointIncompatibility says so
  auto was = [&a](const char* key) {  // saved before the key existed: its default
    return a.contains(key) ? a.at(key) : nlohmann::json(std::string_view(key) == "zero" ? 0 : 1);
  };
  auto layout = [](const nlohmann::json& world, const nlohmann::json& pp, const nlohmann::json& tp,
                   const nlohmann::json& zero) {
    return world.dump() + " workers with --pp " + pp.dump() + " --tp " + tp.dump() + " --zero " + zero.dump();
  };
  for (const char* key : {"world", "pp", "tp", "zero"}) {
    if (was(key) == b.at(key)) continue;
    return "checkpoint " + path + " holds one part of a model split over " +
           layout(was("world"), was("pp"), was("tp"), was("zero")) + "; this run has " +
           layout(b.at("world"), b.at("pp"), b.at("tp"), b.at("zero")) +
           ": resume it on the same layout (a checkpoint resumes on another layout only where neither "
           "layout has --tp or --zero)";
  }
  const int zero = b.at("zero").get<int>();
  if ((zero == 1 || zero == 2) && a.value("bucket_cap_mb", nlohmann::json()) != b.at("bucket_cap_mb"))
    return "checkpoint " + path +
           " holds one worker's part of the optimizer state of buckets of --bucket-cap-mb " +
           a.value("bucket_cap_mb", nlohmann::json()).dump() + "; this run has --bucket-cap-mb " +
           b.at("bucket_cap_mb").dump() + ": resume it with the same buckets";
  return "";
}

namespace {

// A config's value of `key`, or its default for a checkpoint saved before the key existed.
int layoutValue(const nlohmann::json& config, const char* key) {
  if (config.contains(key) && config.at(key).is_number_integer()) return config.at(key).get<int>();
  return std::string_view(key) == "zero" ? 0 : 1;
}

// Both configs readable and neither with --tp or --zero: the layouts a conversion can join.
bool neitherTpNorZero(const nlohmann::json& a, const nlohmann::json& b) {
  for (const nlohmann::json* c : {&a, &b})
    if (!c->is_object() || layoutValue(*c, "tp") != 1 || layoutValue(*c, "zero") != 0) return false;
  return true;
}

// The config of the newest checkpoint of a layout's directory that is complete: its own (DIR/ckpt-*)
// or its parts' (DIR/rank-<r>/ckpt-*, of a step every rank of the layout that saved it finished;
// names sort by step); "" when there is none.
std::string newestConfigIn(const std::string& dir) {
  std::string newest;
  for (const std::string& name : completeCheckpoints(splitCheckpointDir(dir, 0))) {
    const std::string path = (fs::path(splitCheckpointDir(dir, 0)) / name).string();
    const std::string config = savedCheckpointConfig(path);
    const nlohmann::json c = nlohmann::json::parse(config, nullptr, false);
    const int world = c.is_object() ? layoutValue(c, "world") : 1;
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
  const nlohmann::json a = nlohmann::json::parse(saved, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(current, nullptr, false);
  if (!neitherTpNorZero(a, b)) return false;
  // Unsplit on both sides: the plain resume takes any number of workers already.
  if (layoutValue(a, "pp") == 1 && layoutValue(b, "pp") == 1) return false;
  if (layoutValue(a, "world") != layoutValue(b, "world") || layoutValue(a, "pp") != layoutValue(b, "pp")) return true;
  // The same workers and stages, cut elsewhere (another --balance or --virtual-stages): each
  // rank's part no longer holds the layers it gets.
  return a.contains("stage_layers") && b.contains("stage_layers") && a.at("stage_layers") != b.at("stage_layers");
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
  // Set aside by a conversion: any layout without --tp and --zero reads it back.
  return neitherTpNorZero(nlohmann::json::parse(saved.config, nullptr, false),
                          nlohmann::json::parse(current, nullptr, false));
}

std::string setAsideOnlyMessage(const std::string& dir, const std::string& aside) {
  return "--checkpoint-dir " + dir + " holds no checkpoint of its own, only one a conversion set aside (" + aside +
         "): resume it without --tp and --zero (it was not saved with them)";
}

std::string splitCheckpointDir(const std::string& dir, int rank) {
  return (fs::path(dir) / ("rank-" + std::to_string(rank))).string();
}

std::string unsplitCheckpointsMessage(const std::string& dir, const std::string& path) {
  return "--checkpoint-dir " + dir + " holds checkpoints of an unsplit model (" + path +
         ", ...): resume them without --tp and --zero (with or without --pp), or choose another directory";
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

std::string resumeConfig(const TrainOptions& o, int world) {
  const nlohmann::json config = {{"model", o.model},
                                 {"sync_bn", o.syncBn},
                                 {"batch", o.batch},
                                 {"seed", o.seed},
                                 {"optimizer", o.optimizer},
                                 {"world", world},
                                 {"pp", o.pp},
                                 {"tp", o.tp},
                                 {"zero", zeroStage(o)},
                                 {"bucket_cap_mb", o.bucketCapMb}};
  return config.dump();
}

}  // namespace gyre::train
