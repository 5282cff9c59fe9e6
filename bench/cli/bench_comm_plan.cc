#include "bench_comm_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/check.h"
#include "common/compression_spec.h"
#include "common/strings.h"
#include "gyre/errors.h"
#include "gyre/types.h"
#include "train/options.h"
#include "train/records.h"

namespace gyre::app {
namespace {

std::vector<std::string> splitList(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  if (text.empty()) GYRE_USAGE_ERROR(flag, " needs at least one item");
  for (const std::string& item : split(text, ',')) {
    GYRE_USAGE_CHECK(!item.empty(), flag, " '", text, "': an empty item");
    GYRE_USAGE_CHECK(std::find(items.begin(), items.end(), item) == items.end(), flag, " '", text,
                     "': ", item, " twice");
    items.push_back(item);
  }
  GYRE_USAGE_CHECK(!items.empty(), flag, " needs at least one item");
  return items;
}

std::string speedupText(const CommRow& row, const CommRow* baseline) {
  if (baseline == nullptr || !baseline->ok || !baseline->tta.reached || !row.tta.reached ||
      row.tta.timeS <= 0)
    return "-";
  return fmt::format("{:.2f}x", baseline->tta.timeS / row.tta.timeS);
}

}  // namespace

std::vector<std::string> parseCompressionList(const std::string& text) {
  std::vector<std::string> items = splitList(text, "--compressions");
  for (const std::string& item : items) parseCompressionSpec(item, "--compressions");
  return items;
}

std::vector<std::string> parseAlgorithmList(const std::string& text) {
  std::vector<std::string> items;
  for (const std::string& item : splitList(text, "--algorithms")) {
    const std::string name(toString(parseAllreduceAlgorithm(item)));
    GYRE_USAGE_CHECK(std::find(items.begin(), items.end(), name) == items.end(), "--algorithms '", text,
                     "': ", name, " twice");
    items.push_back(name);
  }
  return items;
}

void validate(const CommSettings& s) {
  GYRE_USAGE_CHECK(!s.compressions.empty() && !s.algorithms.empty(), "nothing to run");
  validate(static_cast<const AccuracyJob&>(s));
  GYRE_USAGE_CHECK(s.np == 0 || s.np >= 2, "--np ", s.np, ": gradients travel between at least 2 workers");
  GYRE_USAGE_CHECK(!s.hosts.empty() || (s.rshAgent.empty() && s.networkInterface.empty()),
                   "--rsh-agent and --network-interface are for runs on --hosts");
}

std::string CommRun::label() const {
  return compression + " " + algorithm;
}

std::string CommRun::dirName() const {
  std::string name = compression + "-" + algorithm;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return c == ':' || c == '/' || c == ' '; }, '-');
  return name;
}

bool ownCollectives(const std::string& compression) {
  const std::string kind = parseCompressionSpec(compression, "--compressions").kind;
  return kind == "topk" || kind == "powersgd";
}

std::vector<CommRun> planCommRuns(const CommSettings& s) {
  std::vector<CommRun> runs;
  for (const std::string& c : s.compressions) {
    if (ownCollectives(c)) {
      runs.push_back({c, "auto"});
      continue;
    }
    for (const std::string& a : s.algorithms) runs.push_back({c, a});
  }
  return runs;
}

std::vector<std::string> commRunArguments(const CommSettings& s, const CommRun& run,
                                          const std::string& worker, const std::string& runDir) {
  std::vector<std::string> args = {"run"};
  if (!s.hosts.empty()) {
    args.insert(args.end(), {"-H", s.hosts});
    if (s.np > 0) args.insert(args.end(), {"-np", std::to_string(s.np)});
    if (!s.rshAgent.empty()) args.insert(args.end(), {"--rsh-agent", s.rshAgent});
    if (!s.networkInterface.empty()) args.insert(args.end(), {"--network-interface", s.networkInterface});
  } else {
    args.insert(args.end(), {"-np", std::to_string(s.np > 0 ? s.np : 2)});
  }
  // --threads is gyre run's (it hands each worker GYRE_NUM_THREADS): the worker does not take it
  if (s.threads > 0) args.insert(args.end(), {"--threads", std::to_string(s.threads)});
  args.insert(args.end(), {"--no-tag-output", "--timeout", fmt::format("{}", s.runTimeoutS), "--", worker});
  train::TrainOptions o = trainOptionsOf(s, runDir);
  o.compression = run.compression;
  o.allreduce = run.algorithm;
  const std::vector<std::string> flags = train::changedArguments(o, train::FlagScope::kWorker);
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

CommRow parseCommRun(const CommSettings& s, const CommRun& run, const std::vector<std::string>& evalLines,
                     const std::vector<std::string>& metricsLines) {
  CommRow row;
  row.run = run;
  std::vector<EvalPoint> points;
  for (const std::string& line : evalLines)
    if (const std::optional<EvalPoint> p = parseEvalLine(line)) points.push_back(*p);
  if (points.empty()) throw Error("the run wrote no evaluations to its eval.jsonl");
  row.tta = timeToAccuracy(points, s.target);
  row.samplesPerS = trainingSamplesPerS(row.tta, s.batch);
  const RunTotals totals = parseMetricsLines(metricsLines);
  row.finalAcc = totals.testAcc;
  double bytes = 0;
  int epochs = 0;
  for (const std::string& line : metricsLines) {
    const std::optional<train::EpochRecord> e =
        train::parseEpochRecord(line);  // parseMetricsLines checked them
    if (!e || e->bytesPerStep <= 0) continue;
    bytes += e->bytesPerStep;
    ++epochs;
  }
  if (epochs == 0) throw Error("the run's metrics.jsonl has no bytes_per_step");
  row.bytesPerStep = bytes / epochs;
  row.ok = true;
  return row;
}

std::string commHeader(const CommSettings& s) {
  std::string where =
      s.hosts.empty() ? fmt::format("{} workers on this host (loopback, shared memory)", s.np > 0 ? s.np : 2)
                      : fmt::format("hosts {}{}", s.hosts, s.np > 0 ? fmt::format(", {} workers", s.np) : "");
  return fmt::format(
      "# {} {} epoch(s){}, batch {}{}, target {}, evaluated every {} steps; {}\n"
      "| {:<16} | {:<16} | {:>12} | {:>9} | {:>10} | {:>7} | {:>8} | {:>9} |\n"
      "|{:-<18}|{:-<18}|{:-<14}|{:-<11}|{:-<12}|{:-<9}|{:-<10}|{:-<11}|\n",
      s.model, s.epochs, s.maxSteps > 0 ? fmt::format(" of {} steps", s.maxSteps) : "", s.batch,
      s.lrSchedule == "constant" ? "" : ", learning rate " + s.lrSchedule, s.target,
      s.evalEvery, where, "compression", "allreduce", "bytes/step", "samples/s",
      fmt::format("to {}", s.target), "at step", "speedup", "final acc", "", "", "", "", "", "", "", "");
}

std::string commRowText(const CommRow& row, const CommRow* baseline) {
  if (!row.ok)
    return fmt::format("| {:<16} | {:<16} | failed: {}\n", row.run.compression, row.run.algorithm, row.error);
  const std::string to = row.tta.reached ? fmt::format("{:.1f} s", row.tta.timeS) : "not reached";
  const std::string at = row.tta.reached ? std::to_string(row.tta.step) : "-";
  const double acc = row.finalAcc.value_or(row.tta.finalAcc);
  return fmt::format("| {:<16} | {:<16} | {:>12.0f} | {:>9.0f} | {:>10} | {:>7} | {:>8} | {:>8.2f}% |\n",
                     row.run.compression, row.run.algorithm, row.bytesPerStep, row.samplesPerS, to, at,
                     speedupText(row, baseline), 100 * acc);
}

nlohmann::json commJson(const CommSettings& s, const std::vector<CommRow>& rows) {
  nlohmann::json runs = nlohmann::json::array();
  for (const CommRow& row : rows) {
    nlohmann::json r = {
        {"compression", row.run.compression}, {"allreduce", row.run.algorithm}, {"ok", row.ok}};
    if (!row.ok) {
      r["error"] = row.error;
    } else {
      r["bytes_per_step"] = row.bytesPerStep;
      r["samples_per_s"] = row.samplesPerS;
      r["reached"] = row.tta.reached;
      r["time_to_target_s"] = row.tta.reached ? nlohmann::json(row.tta.timeS) : nlohmann::json(nullptr);
      r["step_at_target"] = row.tta.reached ? nlohmann::json(row.tta.step) : nlohmann::json(nullptr);
      r["final_accuracy"] = row.finalAcc.value_or(row.tta.finalAcc);
    }
    r["run_dir"] = row.runDir;
    runs.push_back(std::move(r));
  }
  return {{"bench", "comm"},           {"model", s.model},        {"np", s.np},       {"hosts", s.hosts},
          {"epochs", s.epochs},        {"max_steps", s.maxSteps}, {"batch", s.batch}, {"target", s.target},
          {"eval_every", s.evalEvery}, {"runs", std::move(runs)}};
}

}  // namespace gyre::app
