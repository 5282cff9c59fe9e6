#include "train/records.h"

#include <sstream>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A record that is not what this header says: gyre::Error with the message alone (the reader
// adds the file and line).
template <typename... Parts>
[[noreturn]] void refuse(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}

template <typename T>
ordered_json orNull(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

// `key` of `j` into `out`, left as it is when absent or null; Error naming the key when present
// with the wrong type.
template <typename T>
void read(const json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception& e) {
    refuse("record field '", key, "': ", e.what());
  }
}
template <typename T>
void read(const json& j, const char* key, std::optional<T>& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  T value{};
  read(j, key, value);
  out = std::move(value);
}
// The same for a field every record has.
template <typename T>
void require(const json& j, const char* key, T& out) {
  if (!j.contains(key) || j.at(key).is_null()) refuse("the record has no '", key, "'");
  read(j, key, out);
}

void checkVersion(const json& j) {
  if (!j.is_object()) refuse("a record is a JSON object, not ", j.type_name());
  int version = 1;
  read(j, "version", version);
  if (version < 1 || version > kRecordVersion)
    refuse("record version ", version, " is not one this gyre reads (1 to ", kRecordVersion, ")");
}

// `line` as a JSON object that has every one of `keys`, or nullopt.
std::optional<json> parseObject(const std::string& line, std::initializer_list<const char*> keys) {
  if (line.empty() || line.front() != '{') return std::nullopt;
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  for (const char* key : keys)
    if (!j.contains(key)) return std::nullopt;
  return j;
}

}  // namespace

ordered_json toJson(const EpochRecord& r) {
  ordered_json j;
  j["version"] = kRecordVersion;
  j["epoch"] = r.epoch;
  j["epochs"] = r.epochs;
  j["world"] = r.world;
  j["plain"] = r.plain;
  j["model"] = r.model;
  j["batch"] = r.batch;
  j["per_rank_batch"] = r.perRankBatch;
  j["lr"] = r.lr;
  j["compression"] = r.compression;
  j["loss"] = r.loss;
  j["test_accuracy"] = orNull(r.testAccuracy);
  j["samples_per_s"] = r.samplesPerS;
  j["seconds"] = r.seconds;
  j["steps"] = r.steps;
  j["timed_steps"] = r.timedSteps;
  j["speedup"] = orNull(r.speedup);
  j["efficiency"] = orNull(r.efficiency);
  j["compute_s"] = r.computeS;
  j["communicate_s"] = r.communicateS;
  j["bytes_per_step"] = r.bytesPerStep;
  j["stragglers"] = nullptr;
  if (r.stragglers) {
    ordered_json list = ordered_json::array();
    for (const Straggler& s : *r.stragglers)
      list.push_back({{"rank", s.rank}, {"since_step", s.since}, {"factor", s.factor}});
    j["stragglers"] = std::move(list);
  }
  j["dropped_gradients"] = orNull(r.droppedGradients);
  j["autotune"] = nullptr;
  if (r.autotune)
    j["autotune"] = {{"bucket_cap_mb", r.autotune->bucketCapMb},
                     {"algorithm", r.autotune->algorithm},
                     {"step_ms", r.autotune->stepMs},
                     {"trials", r.autotune->trials},
                     {"steps", r.autotune->steps},
                     {"summary", r.autotune->summary}};
  j["wait_s"] = r.waitS;
  j["hidden_s"] = r.hiddenS;
  j["data_wait_s"] = r.dataWaitS;
  j["torch_threads"] = r.torchThreads;
  j["blas_threads"] = orNull(r.blasThreads);
  ordered_json saves = ordered_json::array();
  for (const CheckpointSave& c : r.checkpoints)
    saves.push_back({{"step", c.step}, {"bytes", c.bytes}, {"stall_s", c.stallS}, {"path", c.path}});
  j["checkpoints"] = std::move(saves);
  j["mode"] = r.mode;
  j["servers"] = orNull(r.servers);
  j["staleness"] = orNull(r.staleness);
  j["clock_wait_s"] = orNull(r.clockWaitS);
  j["peak_rss_bytes"] = r.peakRssBytes;
  j["model_state_bytes"] = orNull(r.modelStateBytes);
  j["pipeline"] = nullptr;
  if (const auto& p = r.pipeline)
    j["pipeline"] = {{"pp", p->pp},
                     {"dp", p->dp},
                     {"micro_batches", p->microBatches},
                     {"schedule", p->schedule},
                     {"balance", p->balance},
                     {"bubble", p->bubble},
                     {"ideal_bubble", p->idealBubble},
                     {"stage_times_bubble", p->stageTimesBubble},
                     {"stage_ms", p->stageMs},
                     {"peak_activation_bytes", p->peakActivationBytes}};
  return j;
}

ordered_json toJson(const StepRecord& r) {
  ordered_json j;
  j["step"] = r.step;
  j["epoch"] = r.epoch;
  j["loss"] = r.loss;
  j["lr"] = r.lr;
  return j;
}

ordered_json toJson(const EvalRecord& r) {
  ordered_json j;
  j["step"] = r.step;
  j["time_s"] = r.timeS;
  j["test_acc"] = r.testAccuracy;
  return j;
}

ordered_json toJson(const CheckpointConfig& c) {
  ordered_json j;
  j["model"] = c.model;
  j["sync_bn"] = c.syncBn;
  j["batch"] = c.batch;
  j["seed"] = c.seed;
  j["optimizer"] = c.optimizer;
  j["world"] = c.world;
  j["pp"] = c.pp;
  j["tp"] = c.tp;
  j["zero"] = c.zero;
  if (c.bucketCapMb) j["bucket_cap_mb"] = *c.bucketCapMb;
  if (c.stageLayers) j["stage_layers"] = *c.stageLayers;
  return j;
}

EpochRecord epochRecordFromJson(const json& j) {
  checkVersion(j);
  EpochRecord r;
  require(j, "epoch", r.epoch);
  require(j, "samples_per_s", r.samplesPerS);
  read(j, "loss", r.loss);
  read(j, "epochs", r.epochs);
  read(j, "world", r.world);
  read(j, "plain", r.plain);
  read(j, "model", r.model);
  read(j, "batch", r.batch);
  read(j, "per_rank_batch", r.perRankBatch);
  read(j, "lr", r.lr);
  read(j, "compression", r.compression);
  read(j, "test_accuracy", r.testAccuracy);
  read(j, "seconds", r.seconds);
  read(j, "steps", r.steps);
  r.timedSteps = r.steps;  // before timed_steps was recorded, every step was timed
  read(j, "timed_steps", r.timedSteps);
  read(j, "speedup", r.speedup);
  read(j, "efficiency", r.efficiency);
  read(j, "compute_s", r.computeS);
  read(j, "communicate_s", r.communicateS);
  read(j, "bytes_per_step", r.bytesPerStep);
  if (const auto it = j.find("stragglers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) refuse("record field 'stragglers' is not an array");
    r.stragglers.emplace();
    for (const json& s : *it) {
      Straggler x;
      read(s, "rank", x.rank);
      read(s, "since_step", x.since);
      read(s, "factor", x.factor);
      r.stragglers->push_back(x);
    }
  }
  read(j, "dropped_gradients", r.droppedGradients);
  if (const auto it = j.find("autotune"); it != j.end() && !it->is_null()) {
    AutotuneRecord a;
    read(*it, "bucket_cap_mb", a.bucketCapMb);
    read(*it, "algorithm", a.algorithm);
    read(*it, "step_ms", a.stepMs);
    read(*it, "trials", a.trials);
    read(*it, "steps", a.steps);
    read(*it, "summary", a.summary);
    r.autotune = a;
  }
  read(j, "wait_s", r.waitS);
  read(j, "hidden_s", r.hiddenS);
  read(j, "data_wait_s", r.dataWaitS);
  read(j, "torch_threads", r.torchThreads);
  read(j, "blas_threads", r.blasThreads);
  if (const auto it = j.find("checkpoints"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) refuse("record field 'checkpoints' is not an array");
    for (const json& c : *it) {
      CheckpointSave save;
      read(c, "step", save.step);
      read(c, "bytes", save.bytes);
      read(c, "stall_s", save.stallS);
      read(c, "path", save.path);
      r.checkpoints.push_back(save);
    }
  }
  read(j, "mode", r.mode);
  read(j, "servers", r.servers);
  read(j, "staleness", r.staleness);
  read(j, "clock_wait_s", r.clockWaitS);
  read(j, "peak_rss_bytes", r.peakRssBytes);
  read(j, "model_state_bytes", r.modelStateBytes);
  if (const auto it = j.find("pipeline"); it != j.end() && !it->is_null()) {
    PipelineRecord p;
    read(*it, "pp", p.pp);
    read(*it, "dp", p.dp);
    read(*it, "micro_batches", p.microBatches);
    read(*it, "schedule", p.schedule);
    read(*it, "balance", p.balance);
    read(*it, "bubble", p.bubble);
    read(*it, "ideal_bubble", p.idealBubble);
    read(*it, "stage_times_bubble", p.stageTimesBubble);
    read(*it, "stage_ms", p.stageMs);
    read(*it, "peak_activation_bytes", p.peakActivationBytes);
    r.pipeline = std::move(p);
  }
  return r;
}

StepRecord stepRecordFromJson(const json& j) {
  checkVersion(j);
  StepRecord r;
  require(j, "step", r.step);
  read(j, "epoch", r.epoch);
  require(j, "loss", r.loss);
  read(j, "lr", r.lr);
  return r;
}

EvalRecord evalRecordFromJson(const json& j) {
  checkVersion(j);
  EvalRecord r;
  require(j, "step", r.step);
  read(j, "time_s", r.timeS);
  require(j, "test_acc", r.testAccuracy);
  return r;
}

std::optional<EpochRecord> parseEpochRecord(const std::string& line) {
  const std::optional<json> j = parseObject(line, {"epoch", "samples_per_s"});
  if (!j) return std::nullopt;
  try {
    return epochRecordFromJson(*j);
  } catch (const Error& e) {
    refuse("not an epoch record (", e.what(), "): ", line);
  }
}

std::optional<StepRecord> parseStepRecord(const std::string& line) {
  const std::optional<json> j = parseObject(line, {"step"});
  if (!j) return std::nullopt;
  try {
    return stepRecordFromJson(*j);
  } catch (const Error& e) {
    refuse("not a step record (", e.what(), "): ", line);
  }
}

std::optional<EvalRecord> parseEvalRecord(const std::string& line) {
  const std::optional<json> j = parseObject(line, {"step", "test_acc"});
  if (!j) return std::nullopt;
  try {
    return evalRecordFromJson(*j);
  } catch (const Error& e) {
    refuse("not an evaluation record (", e.what(), "): ", line);
  }
}

std::optional<CheckpointConfig> parseCheckpointConfig(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  try {
    CheckpointConfig c;
    read(j, "model", c.model);
    read(j, "sync_bn", c.syncBn);
    read(j, "batch", c.batch);
    read(j, "seed", c.seed);
    read(j, "optimizer", c.optimizer);
    read(j, "world", c.world);
    read(j, "pp", c.pp);
    read(j, "tp", c.tp);
    read(j, "zero", c.zero);
    read(j, "bucket_cap_mb", c.bucketCapMb);
    read(j, "stage_layers", c.stageLayers);
    return c;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace gyre::train
