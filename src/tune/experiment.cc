#include "tune/experiment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/files.h"
#include "common/numbers.h"
#include "gyre/errors.h"

namespace gyre::tune {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpecName = "experiment.json";
constexpr const char* kStateName = "state.json";
constexpr int kFormat = 1;

Json paramJson(const Param& p) {
  return {{"name", p.name},  {"distribution", distributionName(p.distribution)},
          {"low", p.low},    {"high", p.high},
          {"q", p.q},        {"values", p.values},
          {"where", p.where}};
}

Param paramFromJson(const Json& j) {
  Param p;
  p.name = j.at("name").get<std::string>();
  const std::string d = j.at("distribution").get<std::string>();
  const std::optional<Distribution> distribution = parseDistribution(d);
  if (!distribution) throw InvalidArgument("unknown distribution " + d);
  p.distribution = *distribution;
  p.low = j.at("low").get<double>();
  p.high = j.at("high").get<double>();
  p.q = j.at("q").get<double>();
  p.values = j.at("values").get<std::vector<Json>>();
  p.where = j.at("where").get<std::string>();
  validate(p);
  return p;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string csvField(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted(1, '"');
  for (char c : s) {
    quoted += c;
    if (c == '"') quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string number(double v) {
  return std::isnan(v) ? "" : numbers::format(v);
}

Json resultLine(const Trial& t, const Result& r) {
  return {{"trial", t.id},      {"iteration", r.iteration},
          {"time_s", r.time},   {"metric", std::isnan(r.metric) ? Json() : Json(r.metric)},
          {"config", t.config}, {"metrics", r.metrics}};
}

}  // namespace

Json toJson(const ExperimentSpec& s) {
  Json params = Json::array();
  for (const Param& p : s.space.params) params.push_back(paramJson(p));
  const SchedulerOptions& o = s.scheduler;
  return {{"format", kFormat},
          {"space", params},
          {"search",
           {{"name", s.search.name},
            {"samples", s.search.samples},
            {"seed", s.search.seed},
            {"tpe_startup", s.search.tpeStartup}}},
          {"scheduler",
           {{"name", o.name},
            {"max_t", o.maxT},
            {"grace_period", o.gracePeriod},
            {"eta", o.eta},
            {"min_samples", o.minSamples},
            {"perturbation_interval", o.perturbationInterval},
            {"quantile", o.quantile},
            {"resample_probability", o.resampleProbability},
            {"mutations", o.mutations},
            {"seed", o.seed}}},
          {"metric", s.metric},
          {"mode", s.mode},
          {"np", s.np},
          {"max_failures", s.maxFailures},
          {"builtin", s.builtin},
          {"train_args", s.trainArgs},
          {"command", s.command},
          {"threads", s.threads}};
}

ExperimentSpec specFromJson(const Json& j, const std::string& path) {
  if (!j.is_object() || j.value("format", Json()) != kFormat)
    throw InvalidArgument(fmt::format("{} was not written by this version of gyre tune (format {})", path,
                                      j.is_object() ? j.value("format", Json()).dump() : "missing"));
  try {
    ExperimentSpec s;
    for (const Json& p : j.at("space")) s.space.add(paramFromJson(p));
    const Json& search = j.at("search");
    s.search.name = search.at("name").get<std::string>();
    s.search.samples = search.at("samples").get<int>();
    s.search.seed = search.at("seed").get<std::uint64_t>();
    s.search.tpeStartup = search.at("tpe_startup").get<int>();
    const Json& o = j.at("scheduler");
    s.scheduler.name = o.at("name").get<std::string>();
    s.scheduler.maxT = o.at("max_t").get<int>();
    s.scheduler.gracePeriod = o.at("grace_period").get<int>();
    s.scheduler.eta = o.at("eta").get<double>();
    s.scheduler.minSamples = o.at("min_samples").get<int>();
    s.scheduler.perturbationInterval = o.at("perturbation_interval").get<int>();
    s.scheduler.quantile = o.at("quantile").get<double>();
    s.scheduler.resampleProbability = o.at("resample_probability").get<double>();
    s.scheduler.mutations = o.at("mutations").get<std::vector<std::string>>();
    s.scheduler.seed = o.at("seed").get<std::uint64_t>();
    s.metric = j.at("metric").get<std::string>();
    s.mode = j.at("mode").get<std::string>();
    s.np = j.at("np").get<int>();
    s.maxFailures = j.at("max_failures").get<int>();
    s.builtin = j.at("builtin").get<bool>();
    s.trainArgs = j.at("train_args").get<std::vector<std::string>>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.threads = j.at("threads").get<int>();
    return s;
  } catch (const Json::exception& e) {
    throw InvalidArgument(fmt::format("{} is not an experiment gyre tune wrote: {}", path, e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", path, e.what()));
  }
}

std::string ExperimentFiles::trialDir(int id) const {
  return (fs::path(dir_) / "trials" / std::to_string(id)).string();
}

void ExperimentFiles::create(const ExperimentSpec& spec) const {
  std::error_code ec;
  if (fs::exists(fs::path(dir_) / kSpecName, ec))
    throw InvalidArgument(
        fmt::format("--dir {0} already holds an experiment ({1}): pass --resume {0} to finish it, "
                    "or choose another directory",
                    dir_, kSpecName));
  fs::create_directories(fs::path(dir_) / "trials", ec);
  if (ec) throw Error("cannot create the experiment directory " + dir_ + ": " + ec.message());
  files::writeAtomically((fs::path(dir_) / kSpecName).string(), toJson(spec).dump(2) + "\n");
}

ExperimentSpec ExperimentFiles::loadSpec() const {
  const fs::path path = fs::path(dir_) / kSpecName;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InvalidArgument(
        fmt::format("--resume {}: no experiment there (looked for {})", dir_, path.string()));
  const Json j = Json::parse(readFile(path), nullptr, false);
  if (j.is_discarded()) throw InvalidArgument(path.string() + " is not JSON");
  return specFromJson(j, path.string());
}

ExperimentState ExperimentFiles::loadState() const {
  ExperimentState state;
  const fs::path path = fs::path(dir_) / kStateName;
  std::error_code ec;
  if (!fs::exists(path, ec)) return state;
  const Json j = Json::parse(readFile(path), nullptr, false);
  try {
    if (j.is_discarded()) throw InvalidArgument("not JSON");
    for (const Json& t : j.at("trials")) state.trials.push_back(trialFromJson(t));
    state.elapsedBefore = j.at("elapsed_s").get<double>();
    for (std::size_t i = 0; i < state.trials.size(); ++i)
      if (state.trials[i].id != static_cast<int>(i)) throw InvalidArgument("trial ids out of order");
  } catch (const std::exception& e) {
    throw InvalidArgument(
        fmt::format("{} is damaged ({}); the trials' files are in {}/trials", path.string(), e.what(), dir_));
  }
  return state;
}

void ExperimentFiles::saveState(const ExperimentState& state, double elapsedS, const ExperimentSpec& spec,
                                bool withTable) const {
  // A finished trial never changes again: its text is made once (1,000 trials a second would
  // otherwise spend their time serializing the same finished trials).
  std::string text = "{\"trials\":[";
  for (std::size_t i = 0; i < state.trials.size(); ++i) {
    const Trial& t = state.trials[i];
    if (i > 0) text += ',';
    if (!t.finished()) {
      text += toJson(t).dump();
      continue;
    }
    auto cached = finishedText_.find(t.id);
    if (cached == finishedText_.end()) cached = finishedText_.emplace(t.id, toJson(t).dump()).first;
    text += cached->second;
  }
  text += fmt::format("],\"elapsed_s\":{}}}\n", Json(elapsedS).dump());
  files::writeAtomically((fs::path(dir_) / kStateName).string(), text);
  if (!withTable) return;

  // trials.csv: one row per trial, the parameters in the space's order.
  const double sign = spec.sign();
  std::string csv = "trial_id,status";
  for (const Param& p : spec.space.params) csv += fmt::format(",{}", csvField(p.name));
  csv += fmt::format(
      ",iteration,last_{0},best_{0},failures,stopped_early,worker_iterations,busy_slot_s,node,error\n",
      csvField(spec.metric));
  for (const Trial& t : state.trials) {
    csv += fmt::format("{},{}", t.id, statusName(t.status));
    for (const Param& p : spec.space.params)
      csv += fmt::format(",{}", csvField(t.config.contains(p.name) ? formatValue(t.config.at(p.name)) : ""));
    csv += fmt::format(",{},{},{},{},{},{},{},{},{}\n", t.iteration(), number(t.last()), number(t.best(sign)),
                       t.failures, t.stoppedEarly ? "true" : "false", numbers::format(t.workerIterations),
                       numbers::format(t.busySeconds), csvField(t.node), csvField(t.error));
  }
  files::writeAtomically((fs::path(dir_) / "trials.csv").string(), csv);
}

void ExperimentFiles::appendResult(const Trial& t, const Result& r) const {
  std::ofstream out(fs::path(dir_) / "results.jsonl", std::ios::app);
  out << resultLine(t, r).dump() << '\n';
  if (!out) files::fail("append to", (fs::path(dir_) / "results.jsonl").string(), errno);
}

void ExperimentFiles::rewriteResults(const ExperimentState& state) const {
  // In the order they arrived, as appendResult wrote them.
  std::vector<std::pair<const Trial*, const Result*>> all;
  for (const Trial& t : state.trials)
    for (const Result& r : t.results) all.emplace_back(&t, &r);
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.second->time < b.second->time; });
  std::string text;
  for (const auto& [t, r] : all) text += resultLine(*t, *r).dump() + "\n";
  files::writeAtomically((fs::path(dir_) / "results.jsonl").string(), text);
}

}  // namespace gyre::tune
