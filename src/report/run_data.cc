#include "report/run_data.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"

namespace gyre::report {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The JSON objects of a .jsonl file, each with its line number; none when the file is absent.
std::vector<std::pair<int, Json>> jsonLines(const fs::path& path) {
  std::vector<std::pair<int, Json>> out;
  std::ifstream in(path);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(line, nullptr, false);
    // A last line cut short by a killed writer is what a live run can show; any other is an error.
    if (j.is_discarded() && in.peek() == std::char_traits<char>::eof()) break;
    GYRE_USAGE_CHECK(j.is_object(), path.string(), ":", number, ": not a JSON object");
    out.emplace_back(number, std::move(j));
  }
  return out;
}

// The record `read` makes of `j`, its errors refused as the user's input, with the file and line.
template <typename Read>
auto record(const fs::path& path, int line, const Json& j, Read read) {
  try {
    return read(j);
  } catch (const Error& e) {
    GYRE_USAGE_ERROR(path.string(), ":", line, ": ", e.what());
  }
}

double number(const Json& j, const char* key, double otherwise = 0) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : otherwise;
}

}  // namespace

Run loadRun(const std::string& dirText) {
  const fs::path dir(dirText);
  Run run;
  run.dir = dirText;
  run.name = fs::path(dirText).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::path(dirText).lexically_normal().parent_path().filename().string();
  GYRE_USAGE_CHECK(fs::is_directory(dir), dirText, ": not a directory");
  const bool haveMetrics = fs::exists(dir / "metrics.jsonl"), haveSteps = fs::exists(dir / "steps.jsonl");
  GYRE_USAGE_CHECK(haveMetrics || haveSteps, dirText,
                   ": holds no run of gyre train: looked for metrics.jsonl and steps.jsonl (and config.json, "
                   "progress.jsonl beside them)");
  if (std::ifstream in(dir / "config.json"); in) {
    std::stringstream text;
    text << in.rdbuf();
    const std::optional<train::CheckpointConfig> c = train::parseCheckpointConfig(text.str());
    GYRE_USAGE_CHECK(c.has_value(), (dir / "config.json").string(), ": not a config.json of gyre train");
    run.world = c->world;
    run.model = c->model;
    run.batch = static_cast<int>(c->batch);
  }
  for (const auto& [line, j] : jsonLines(dir / "metrics.jsonl")) {
    Epoch e = record(dir / "metrics.jsonl", line, j, train::epochRecordFromJson);
    run.mode = e.mode;
    run.world = e.world;
    run.epochs.push_back(std::move(e));
  }
  for (const auto& [line, j] : jsonLines(dir / "steps.jsonl")) {
    const train::StepRecord s = record(dir / "steps.jsonl", line, j, train::stepRecordFromJson);
    run.stepNumbers.push_back(s.step);
    run.stepLosses.push_back(s.loss);
  }
  // A restarted run logs a step again after its resume: the newest record of each step wins.
  std::map<std::int64_t, StepTime> byStep;
  for (const auto& [line, j] : jsonLines(dir / "progress.jsonl")) {
    if (!j.contains("step") || !j.contains("time")) continue;
    StepTime t;
    t.step = static_cast<std::int64_t>(number(j, "step"));
    t.time = number(j, "time");
    if (j.contains("rank_ms") && j.at("rank_ms").is_array())
      for (const Json& v : j.at("rank_ms")) t.rankMs.push_back(v.is_number() ? v.get<double>() : 0);
    byStep[t.step] = std::move(t);
  }
  for (auto& [step, t] : byStep) run.stepTimes.push_back(std::move(t));
  return run;
}

std::vector<BenchSeries> loadBench(const std::string& path) {
  GYRE_USAGE_CHECK(fs::is_regular_file(path), path,
                   ": no such file (give the output of `gyre bench collectives --json`)");
  std::map<std::string, BenchSeries> series;
  std::vector<std::string> order;
  for (const auto& [line, j] : jsonLines(path)) {
    if (!j.contains("busbw_GBps") || !j.contains("bytes")) continue;
    const std::string label = j.value("op", "?") + " " + j.value("algo", "?") + ", " +
                              std::to_string(static_cast<int>(number(j, "np"))) + " ranks, " +
                              j.value("dtype", "?") + ", " + j.value("transport", "auto");
    auto [it, fresh] = series.try_emplace(label);
    if (fresh) {
      it->second.file = path;
      it->second.label = label;
      order.push_back(label);
    }
    BenchPoint p;
    p.bytes = number(j, "bytes");
    p.busbw = number(j, "busbw_GBps");
    if (j.contains("mpi_busbw_GBps") && j.at("mpi_busbw_GBps").is_number())
      p.peerBusbw = j.at("mpi_busbw_GBps").get<double>();
    it->second.points.push_back(p);
  }
  GYRE_USAGE_CHECK(!order.empty(), path,
                   ": no line of `gyre bench collectives --json` (with busbw_GBps and bytes)");
  std::vector<BenchSeries> out;
  for (const std::string& label : order) out.push_back(std::move(series.at(label)));
  return out;
}

}  // namespace gyre::report
