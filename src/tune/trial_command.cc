#include "tune/trial_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace gyre::tune {
namespace {

namespace fs = std::filesystem;

std::string substitute(std::string word, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [name, value] : values) {
    const std::string key = "{" + name + "}";
    for (std::size_t at = word.find(key); at != std::string::npos; at = word.find(key, at + value.size()))
      word.replace(at, key.size(), value);
  }
  return word;
}

}  // namespace

std::string trainFlag(const std::string& param) {
  std::string flag = param;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return "--" + flag;
}

bool fixedOnResume(const std::string& param) {
  const std::string flag = trainFlag(param);
  return flag == "--model" || flag == "--batch" || flag == "--seed" || flag == "--optimizer" ||
         flag == "--sync-bn" || flag == "--np";
}

RunPaths runPaths(const ExperimentSpec& spec, const std::string& trialDir) {
  const fs::path dir(trialDir);
  return {dir.string(), (dir / "ckpt").string(),
          (dir / (spec.builtin ? "metrics.jsonl" : "result.jsonl")).string(), (dir / "output.log").string()};
}

RunSpec runSpec(const ExperimentSpec& spec, const Trial& t, const RunPaths& paths, const std::string& gyre) {
  RunSpec run;
  run.trial = t.id;
  run.logPath = paths.logFile;
  run.slots = t.np;
  run.startsItsWorkers = spec.builtin;
  if (spec.builtin) {
    run.argv = {gyre, "train"};
    run.argv.insert(run.argv.end(), spec.trainArgs.begin(), spec.trainArgs.end());
    for (const auto& [name, value] : t.config.items()) {
      run.argv.push_back(trainFlag(name));
      run.argv.push_back(formatValue(value));
    }
    for (const std::string& word :
         {std::string("--np"), std::to_string(t.np), std::string("--threads"), std::to_string(spec.threads),
          std::string("--epochs"), std::to_string(t.stopAt), std::string("--run-dir"), paths.trialDir,
          std::string("--checkpoint-dir"), paths.checkpointDir, std::string("--keep-last"), std::string("1"),
          std::string("--resume"), std::string("--progress"), std::string("off")})
      run.argv.push_back(word);
    return run;
  }
  std::vector<std::pair<std::string, std::string>> values = {
      {"trial_id", std::to_string(t.id)},
      {"trial_dir", paths.trialDir},
      {"checkpoint_dir", paths.checkpointDir},
      {"stop_at", std::to_string(t.stopAt)},
      {"start_iteration", std::to_string(t.checkpointAt)}};
  for (const auto& [name, value] : t.config.items()) values.emplace_back(name, formatValue(value));
  for (const std::string& word : spec.command) run.argv.push_back(substitute(word, values));
  run.env = {{"GYRE_TUNE_TRIAL_ID", std::to_string(t.id)},
             {"GYRE_TUNE_TRIAL_DIR", paths.trialDir},
             {"GYRE_TUNE_CHECKPOINT_DIR", paths.checkpointDir},
             {"GYRE_TUNE_STOP_AT", std::to_string(t.stopAt)},
             {"GYRE_TUNE_START_ITERATION", std::to_string(t.checkpointAt)},
             {"GYRE_TUNE_REPORT_FILE", paths.reportFile}};
  return run;
}

std::optional<Result> parseReport(const std::string& line, const std::string& metric, int previous) {
  const Json j = Json::parse(line, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  Result r;
  r.metrics = Json::object();
  for (const auto& [key, value] : j.items())
    if ((value.is_number() || value.is_boolean()) && key != "iteration") r.metrics[key] = value;
  // gyre train's metrics.jsonl says test_accuracy; tune users ask for accuracy.
  if (!r.metrics.contains("accuracy") && r.metrics.contains("test_accuracy"))
    r.metrics["accuracy"] = r.metrics["test_accuracy"];
  const Json& it = j.contains("iteration") ? j.at("iteration") : j.contains("epoch") ? j.at("epoch") : Json();
  r.iteration = it.is_number_integer() ? it.get<int>() : previous + 1;
  if (r.metrics.contains(metric) && r.metrics.at(metric).is_number())
    r.metric = r.metrics.at(metric).get<double>();
  return r;
}

}  // namespace gyre::tune
