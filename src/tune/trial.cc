#include "tune/trial.h"

namespace gyre::tune {
namespace {

constexpr const char* kNames[] = {"PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"};

Json numberOrNull(double v) {
  return std::isnan(v) ? Json() : Json(v);
}

double numberOr(const Json& v) {
  return v.is_number() ? v.get<double>() : std::nan("");
}

}  // namespace

const char* statusName(TrialStatus s) {
  return kNames[static_cast<int>(s)];
}

std::optional<TrialStatus> parseStatus(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kNames[i]) return static_cast<TrialStatus>(i);
  return std::nullopt;
}

const Result* Trial::at(int iteration) const {
  for (const Result& r : results)
    if (r.iteration == iteration) return &r;
  return nullptr;
}

double Trial::best(double sign) const {
  double best = std::nan("");
  for (const Result& r : results)
    if (!std::isnan(r.metric) && (std::isnan(best) || sign * r.metric > sign * best)) best = r.metric;
  return best;
}

Json toJson(const Trial& t) {
  Json results = Json::array();
  for (const Result& r : t.results)
    results.push_back({{"iteration", r.iteration},
                       {"metric", numberOrNull(r.metric)},
                       {"time", r.time},
                       {"metrics", r.metrics}});
  Json lineage = Json::array();
  for (const Exploit& e : t.lineage)
    lineage.push_back({{"iteration", e.iteration}, {"source", e.source}, {"config", e.config}});
  return {{"id", t.id},
          {"config", t.config},
          {"status", statusName(t.status)},
          {"results", results},
          {"stop_at", t.stopAt},
          {"run_start", t.runStart},
          {"checkpoint_at", t.checkpointAt},
          {"failures", t.failures},
          {"stopped_early", t.stoppedEarly},
          {"error", t.error},
          {"lineage", lineage},
          {"np", t.np},
          {"node", t.node},
          {"worker_iterations", t.workerIterations},
          {"busy_s", t.busySeconds}};
}

Trial trialFromJson(const Json& j) {
  Trial t;
  t.id = j.at("id").get<int>();
  t.config = j.at("config");
  const auto status = parseStatus(j.at("status").get<std::string>());
  if (!status) throw Json::other_error::create(501, "unknown trial status " + j.at("status").dump(), &j);
  t.status = *status;
  for (const Json& r : j.at("results"))
    t.results.push_back({r.at("iteration").get<int>(), numberOr(r.at("metric")), r.at("time").get<double>(),
                         r.at("metrics")});
  t.stopAt = j.at("stop_at").get<int>();
  t.runStart = j.at("run_start").get<int>();
  t.checkpointAt = j.at("checkpoint_at").get<int>();
  t.failures = j.at("failures").get<int>();
  t.stoppedEarly = j.at("stopped_early").get<bool>();
  t.error = j.at("error").get<std::string>();
  for (const Json& e : j.at("lineage"))
    t.lineage.push_back({e.at("iteration").get<int>(), e.at("source").get<int>(), e.at("config")});
  t.np = j.at("np").get<int>();
  t.node = j.at("node").get<std::string>();
  t.workerIterations = j.at("worker_iterations").get<double>();
  t.busySeconds = j.at("busy_s").get<double>();
  return t;
}

}  // namespace gyre::tune
