#include "train/records.h"

#include <sstream>
#include <type_traits>

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

// Each record's fields, named once, in the order they are written: `field(key, member)`, with
// kRequired for the fields without which a line is not such a record. The writer and the reader
// below walk the same list; a record nested in a field (a straggler, a checkpoint save, the
// autotune and pipeline figures) has its own list.
enum Presence { kOptional, kRequired };

template <typename R, typename T>
concept Is = std::is_same_v<std::remove_const_t<R>, T>;

template <typename F, Is<Straggler> R>
void fields(R& s, F&& field) {
  field("rank", s.rank);
  field("since_step", s.since);
  field("factor", s.factor);
}

template <typename F, Is<CheckpointSave> R>
void fields(R& c, F&& field) {
  field("step", c.step);
  field("bytes", c.bytes);
  field("stall_s", c.stallS);
  field("path", c.path);
}

template <typename F, Is<AutotuneRecord> R>
void fields(R& a, F&& field) {
  field("bucket_cap_mb", a.bucketCapMb);
  field("algorithm", a.algorithm);
  field("step_ms", a.stepMs);
  field("trials", a.trials);
  field("steps", a.steps);
  field("summary", a.summary);
}

template <typename F, Is<PipelineRecord> R>
void fields(R& p, F&& field) {
  field("pp", p.pp);
  field("dp", p.dp);
  field("micro_batches", p.microBatches);
  field("schedule", p.schedule);
  field("balance", p.balance);
  field("bubble", p.bubble);
  field("ideal_bubble", p.idealBubble);
  field("stage_times_bubble", p.stageTimesBubble);
  field("stage_ms", p.stageMs);
  field("peak_activation_bytes", p.peakActivationBytes);
}

template <typename F, Is<EpochRecord> R>
void fields(R& r, F&& field) {
  field("epoch", r.epoch, kRequired);
  field("epochs", r.epochs);
  field("world", r.world);
  field("plain", r.plain);
  field("model", r.model);
  field("batch", r.batch);
  field("per_rank_batch", r.perRankBatch);
  field("lr", r.lr);
  field("compression", r.compression);
  field("loss", r.loss);
  field("test_accuracy", r.testAccuracy);
  field("samples_per_s", r.samplesPerS, kRequired);
  field("seconds", r.seconds);
  field("steps", r.steps);
  field("timed_steps", r.timedSteps);
  field("speedup", r.speedup);
  field("efficiency", r.efficiency);
  field("compute_s", r.computeS);
  field("communicate_s", r.communicateS);
  field("bytes_per_step", r.bytesPerStep);
  field("stragglers", r.stragglers);
  field("dropped_gradients", r.droppedGradients);
  field("autotune", r.autotune);
  field("wait_s", r.waitS);
  field("hidden_s", r.hiddenS);
  field("data_wait_s", r.dataWaitS);
  field("torch_threads", r.torchThreads);
  field("blas_threads", r.blasThreads);
  field("checkpoints", r.checkpoints);
  field("mode", r.mode);
  field("servers", r.servers);
  field("staleness", r.staleness);
  field("clock_wait_s", r.clockWaitS);
  field("peak_rss_bytes", r.peakRssBytes);
  field("model_state_bytes", r.modelStateBytes);
  field("parameter_bytes", r.parameterBytes);
  field("pipeline", r.pipeline);
}

template <typename F, Is<StepRecord> R>
void fields(R& r, F&& field) {
  field("step", r.step, kRequired);
  field("epoch", r.epoch);
  field("loss", r.loss, kRequired);
  field("lr", r.lr);
}

template <typename F, Is<EvalRecord> R>
void fields(R& r, F&& field) {
  field("step", r.step, kRequired);
  field("time_s", r.timeS);
  field("test_acc", r.testAccuracy, kRequired);
}

template <typename F, Is<CheckpointConfig> R>
void fields(R& c, F&& field) {
  field("model", c.model);
  field("sync_bn", c.syncBn);
  field("batch", c.batch);
  field("seed", c.seed);
  field("optimizer", c.optimizer);
  field("world", c.world);
  field("pp", c.pp);
  field("tp", c.tp);
  field("zero", c.zero);
  field("bucket_cap_mb", c.bucketCapMb);
  field("stage_layers", c.stageLayers);
}

template <typename T>
concept Record = requires(T& r) { fields(r, [](const char*, auto&, Presence = kOptional) {}); };

// Writing: a record is an object of its fields, an optional one null when it is unknown.
template <typename T>
ordered_json value(const T& v);
template <typename T>
ordered_json value(const std::optional<T>& v);
template <typename T>
ordered_json value(const std::vector<T>& v);
template <typename T>
ordered_json value(const std::optional<T>& v) {
  return v ? value(*v) : ordered_json(nullptr);
}
template <typename T>
ordered_json value(const std::vector<T>& v) {
  ordered_json list = ordered_json::array();
  for (const T& x : v) list.push_back(value(x));
  return list;
}
template <typename T>
ordered_json value(const T& v) {
  if constexpr (Record<T>) {
    ordered_json j = ordered_json::object();
    fields(v, [&](const char* key, const auto& member, Presence = kOptional) { j[key] = value(member); });
    return j;
  } else {
    return ordered_json(v);
  }
}

// Reading: a field absent or null leaves its member as it is; one of the wrong type is an Error
// naming it (and the field it is nested in).
template <typename T>
void get(const json& j, T& out);
template <typename T>
void get(const json& j, std::optional<T>& out);
template <typename T>
void get(const json& j, std::vector<T>& out);
template <typename T>
void get(const json& j, std::optional<T>& out) {
  T v{};
  get(j, v);
  out = std::move(v);
}
template <typename T>
void get(const json& j, std::vector<T>& out) {
  if (!j.is_array()) refuse("not an array but ", j.type_name());
  out.clear();
  for (const json& e : j) get(e, out.emplace_back());
}
template <typename T>
void get(const json& j, T& out) {
  if constexpr (Record<T>) {
    if (!j.is_object()) refuse("not an object but ", j.type_name());
    fields(out, [&](const char* key, auto& member, Presence presence = kOptional) {
      const auto it = j.find(key);
      if (it == j.end() || it->is_null()) {
        if (presence == kRequired) refuse("the record has no '", key, "'");
        return;
      }
      try {
        get(*it, member);
      } catch (const json::exception& e) {
        refuse("record field '", key, "': ", e.what());
      } catch (const Error& e) {
        refuse("record field '", key, "': ", e.what());
      }
    });
  } else {
    out = j.get<T>();
  }
}

void checkVersion(const json& j) {
  if (!j.is_object()) refuse("a record is a JSON object, not ", j.type_name());
  int version = 1;
  if (const auto it = j.find("version"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) refuse("record field 'version' is not an integer");
    version = it->get<int>();
  }
  if (version < 1 || version > kRecordVersion)
    refuse("record version ", version, " is not one this gyre reads (1 to ", kRecordVersion, ")");
}

template <typename R>
R fromJson(const json& j) {
  checkVersion(j);
  R r;
  get(j, r);
  return r;
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

// One line of a .jsonl file as the record `what` names: nullopt unless it has `keys`, then
// read by `fromJson` with the line added to its Error.
template <typename R>
std::optional<R> parseLine(const std::string& line, std::initializer_list<const char*> keys,
                           R (*fromJson)(const json&), const char* what) {
  const std::optional<json> j = parseObject(line, keys);
  if (!j) return std::nullopt;
  try {
    return fromJson(*j);
  } catch (const Error& e) {
    refuse("not ", what, " record (", e.what(), "): ", line);
  }
}

}  // namespace

ordered_json toJson(const EpochRecord& r) {
  ordered_json j = {{"version", kRecordVersion}};
  j.update(value(r));
  return j;
}
ordered_json toJson(const StepRecord& r) { return value(r); }
ordered_json toJson(const EvalRecord& r) { return value(r); }
ordered_json toJson(const CheckpointConfig& c) {
  // config.json leaves out a field that does not apply rather than writing it null.
  ordered_json j = value(c);
  for (const char* key : {"bucket_cap_mb", "stage_layers"})
    if (j[key].is_null()) j.erase(key);
  return j;
}

EpochRecord epochRecordFromJson(const json& j) {
  EpochRecord r = fromJson<EpochRecord>(j);
  // Before timed_steps was recorded, every step was timed.
  if (const auto it = j.find("timed_steps"); it == j.end() || it->is_null()) r.timedSteps = r.steps;
  return r;
}
StepRecord stepRecordFromJson(const json& j) { return fromJson<StepRecord>(j); }
EvalRecord evalRecordFromJson(const json& j) { return fromJson<EvalRecord>(j); }

std::optional<EpochRecord> parseEpochRecord(const std::string& line) {
  return parseLine(line, {"epoch", "samples_per_s"}, epochRecordFromJson, "an epoch");
}
std::optional<StepRecord> parseStepRecord(const std::string& line) {
  return parseLine(line, {"step"}, stepRecordFromJson, "a step");
}
std::optional<EvalRecord> parseEvalRecord(const std::string& line) {
  return parseLine(line, {"step", "test_acc"}, evalRecordFromJson, "an evaluation");
}

std::optional<CheckpointConfig> parseCheckpointConfig(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  try {
    CheckpointConfig c;
    get(j, c);
    return c;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace gyre::train
