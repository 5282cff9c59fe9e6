#include "bench_train_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace gyre::app {
namespace {

std::string percent(bool has, double share) {
  return has ? fmt::format("{:.1f}", 100.0 * share) : "-";
}

// The reported count, or the asked one when the process did not report it.
std::string threadCell(int reported, int asked) {
  if (reported <= 0) return fmt::format("{}?", asked);
  return reported == asked ? std::to_string(reported) : fmt::format("{}!", reported);
}

std::string formatValue(const TargetCheck& c, double v) {
  if (c.atMost) return fmt::format("{:.1f}%", 100.0 * v);  // overhead: a share
  return fmt::format("{:.3f}", v);
}

}  // namespace

TrainReportContext trainReportContext(const TrainBenchFlags& f, const BenchMachine& m) {
  TrainReportContext ctx;
  ctx.repeat = f.repeat;
  ctx.pick = parsePick(f.pick);
  ctx.lr = f.lr;
  ctx.momentum = f.momentum;
  ctx.compression = f.compression;
  ctx.shardOptimizer = f.shardOptimizer;
  ctx.usableCores = m.usableCores;
  ctx.loadAverage = m.loadAverage;
  return ctx;
}

std::string machineText(const TrainReportContext& ctx) {
  std::string load = ctx.loadAverage < 0 ? "unknown" : fmt::format("{:.2f}", ctx.loadAverage);
  return fmt::format(
      "machine: {} usable cores, load average {} at the start (other busy processes lower every figure)\n",
      ctx.usableCores, load);
}

std::string settingsText(const TrainConfig& any, const TrainReportContext& ctx) {
  return fmt::format(
      "model {}: global batch {}, {} steps per run (the first {} untimed), SGD lr {} momentum {}, "
      "compression {}{}; {} of {} run{} per configuration\n"
      "threads per process: torch = libtorch intra-op (--threads), blas = OpenBLAS (OPENBLAS_NUM_THREADS), "
      "as each process reported them\n",
      any.model, any.globalBatch, any.steps, any.skip, ctx.lr, ctx.momentum, ctx.compression,
      ctx.shardOptimizer ? ", sharded optimizer step" : "", toString(ctx.pick), ctx.repeat,
      ctx.repeat == 1 ? "" : "s");
}

std::string tableHeader() {
  return fmt::format("{:<16} {:>5} {:>10} {:>9} {:>8} {:>10} {:>8} {:>8} {:>6} {:>7} {:>6} {:>7}\n", "config",
                     "world", "batch/rank", "torch thr", "blas thr", "samples/s", "step ms", "compute%",
                     "comm%", "hidden%", "wait%", "spread%");
}

std::string tableRow(const ConfigResult& r) {
  const TrainConfig& c = r.config;
  const RunFigures& f = r.figures;
  const bool split = f.hasSplit;
  return fmt::format("{:<16} {:>5} {:>10} {:>9} {:>8} {:>10.0f} {:>8.2f} {:>8} {:>6} {:>7} {:>6} {:>7}\n",
                     c.label(), c.world, c.batchPerProcess(), threadCell(f.torchThreads, c.threads.torch),
                     threadCell(f.blasThreads, c.threads.blas), f.samplesPerS, f.stepMs(),
                     percent(split, f.computeShare()), percent(split, f.communicateShare()),
                     percent(split && f.communicateS > 0, f.hiddenShare()), percent(split, f.waitShare()),
                     percent(r.runSamplesPerS.size() > 1, runSpread(r.runSamplesPerS)));
}

double runSpread(const std::vector<double>& runs) {
  if (runs.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
  return *hi > 0 ? (*hi - *lo) / *hi : 0;
}

bool threadsDiffer(const ConfigResult& r) {
  const RunFigures& f = r.figures;
  return (f.torchThreads > 0 && f.torchThreads != r.config.threads.torch) ||
         (f.blasThreads > 0 && f.blasThreads != r.config.threads.blas);
}

std::string threadsWarning(const ConfigResult& r) {
  if (!threadsDiffer(r)) return "";
  const TrainConfig& c = r.config;
  return fmt::format("warning: {} {} asked for torch {} blas {} threads; the process reported {} and {}\n",
                     c.model, c.label(), c.threads.torch, c.threads.blas, r.figures.torchThreads,
                     r.figures.blasThreads);
}

std::string summaryText(const std::vector<TargetCheck>& checks, const TrainReportContext& ctx,
                        int globalBatch) {
  return fmt::format("\nsummary (global batch {}; {} of {} run{} per configuration)\n{}{}\n", globalBatch,
                     toString(ctx.pick), ctx.repeat, ctx.repeat == 1 ? "" : "s", targetsText(checks),
                     targetsTally(checks));
}

std::string targetsText(const std::vector<TargetCheck>& checks) {
  std::string out;
  std::string model;
  for (const TargetCheck& c : checks) {
    if (c.model != model) {
      model = c.model;
      out += fmt::format("targets ({}):\n", model);
    }
    const std::string target =
        c.threshold ? fmt::format("{} {}", c.atMost ? "<=" : ">=", formatValue(c, *c.threshold)) : "-";
    const std::string measured = c.measured ? formatValue(c, *c.measured) : "-";
    const std::string how = c.measured ? c.definition : c.skipped;
    out += fmt::format("  {:<26} target {:>8}  measured {:>8}  {:<4}  {}\n", c.name, target, measured,
                       c.status(), how);
  }
  return out;
}

std::string targetsTally(const std::vector<TargetCheck>& checks) {
  int pass = 0, miss = 0, skip = 0;
  for (const TargetCheck& c : checks) {
    const std::string s = c.status();
    pass += s == "PASS";
    miss += s == "MISS";
    skip += s == "SKIP";
  }
  return fmt::format("{} PASS, {} MISS, {} SKIP", pass, miss, skip);
}

nlohmann::json configJson(const ConfigResult& r, const TrainReportContext& ctx) {
  const TrainConfig& c = r.config;
  const RunFigures& f = r.figures;
  nlohmann::json j = {
      {"type", "config"},
      {"model", c.model},
      {"config", c.label()},
      {"runner", toString(c.runner)},
      {"world", c.world},
      {"global_batch", c.globalBatch},
      {"batch_per_rank", c.batchPerProcess()},
      {"torch_threads", f.torchThreads > 0 ? f.torchThreads : c.threads.torch},
      {"blas_threads", f.blasThreads > 0 ? f.blasThreads : c.threads.blas},
      {"requested_torch_threads", c.threads.torch},
      {"requested_blas_threads", c.threads.blas},
      {"steps", c.steps},
      {"skip", c.skip},
      {"timed_steps", f.steps},
      {"seconds", f.seconds},
      {"samples_per_s", f.samplesPerS},
      {"step_ms", f.stepMs()},
      {"loss", f.loss},
      {"pick", toString(ctx.pick)},
      {"runs_samples_per_s", r.runSamplesPerS},
  };
  if (r.runSamplesPerS.size() > 1) j["spread"] = runSpread(r.runSamplesPerS);
  if (c.referenceFor > 0) j["reference_for"] = c.referenceFor;
  if (c.runner == TrainRunner::kGyre) j["compression"] = ctx.compression;
  if (c.runner == TrainRunner::kGyre) j["shard_optimizer"] = ctx.shardOptimizer && c.world > 1;
  if (f.hasSplit) {
    j["compute_share"] = f.computeShare();
    j["communicate_share"] = f.communicateShare();
    j["hidden_share"] = f.hiddenShare();
    j["wait_share"] = f.waitShare();
  }
  return j;
}

nlohmann::json summaryJson(const std::vector<TargetCheck>& checks, const TrainReportContext& ctx) {
  nlohmann::json targets = nlohmann::json::array();
  int pass = 0, miss = 0, skip = 0;
  for (const TargetCheck& c : checks) {
    nlohmann::json t = {{"model", c.model}, {"target", c.name}, {"status", c.status()}};
    if (c.threshold) t["threshold"] = *c.threshold;
    if (c.threshold) t["comparison"] = c.atMost ? "<=" : ">=";
    if (c.measured) t["measured"] = *c.measured;
    t[c.measured ? "definition" : "skipped"] = c.measured ? c.definition : c.skipped;
    targets.push_back(t);
    pass += c.status() == "PASS";
    miss += c.status() == "MISS";
    skip += c.status() == "SKIP";
  }
  nlohmann::json j = {{"type", "summary"},    {"pick", toString(ctx.pick)},
                      {"repeat", ctx.repeat}, {"targets", targets},
                      {"pass", pass},         {"miss", miss},
                      {"skip", skip},         {"usable_cores", ctx.usableCores}};
  if (ctx.loadAverage >= 0) j["load_average_start"] = ctx.loadAverage;
  return j;
}

}  // namespace gyre::app
