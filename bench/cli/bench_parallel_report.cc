#include "bench_parallel_report.h"

#include <fmt/format.h>

#include "bench_train_report.h"

namespace gyre::app {
namespace {

std::string mebibytes(std::optional<std::int64_t> bytes) {
  return bytes ? fmt::format("{:.1f}", static_cast<double>(*bytes) / (1 << 20)) : "-";
}

std::string shareText(std::optional<double> value) {
  return value ? fmt::format("{:.1f}%", 100 * *value) : "-";
}

}  // namespace

std::string parallelSettingsText(const ParallelBenchSettings& s) {
  return fmt::format(
      "model {}: global batch {}, {} steps per run ({} untimed), 1 thread per worker, balance {}, the "
      "median of {} run{} per row\n",
      s.model, s.globalBatch, s.steps, s.skip, s.balance, s.repeat, s.repeat == 1 ? "" : "s");
}

std::string parallelHeader() {
  return fmt::format("{:<26} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>6} {:>6}  {}\n",
                     "layout", "np", "samples/s", "bubble", "formula", "stages", "rss MiB", "state MiB",
                     "activ MiB", "compute", "comm", "wait", "balance");
}

std::string parallelRow(const ParallelResult& r) {
  const ParallelFigures& f = r.figures;
  const RunFigures& run = f.run;
  std::string balance;
  for (int n : f.balance) balance += (balance.empty() ? "" : ",") + std::to_string(n);
  return fmt::format("{:<26} {:>5} {:>10.0f} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>6} {:>6}  {}\n",
                     r.config.name, r.config.world, run.samplesPerS, shareText(f.bubble),
                     shareText(f.idealBubble), shareText(f.stageTimesBubble), mebibytes(f.peakRssBytes),
                     mebibytes(f.modelStateBytes), mebibytes(f.peakActivationBytes),
                     shareText(run.computeShare()), shareText(run.communicateShare()),
                     shareText(run.waitShare()), balance);
}

nlohmann::json parallelRowJson(const ParallelResult& r) {
  const ParallelFigures& f = r.figures;
  auto orNull = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {
      {"layout", r.config.name},
      {"np", r.config.world},
      {"pp", r.config.pp},
      {"schedule", r.config.pp > 1 ? nlohmann::json(r.config.schedule) : nlohmann::json(nullptr)},
      {"virtual_stages", r.config.virtualStages},
      {"micro_batches", r.config.pp > 1 ? nlohmann::json(r.config.microBatches) : nlohmann::json(nullptr)},
      {"zero", r.config.zero},
      {"tp", r.config.tp},
      {"vit_width", r.config.vitWidth > 0 ? nlohmann::json(r.config.vitWidth) : nlohmann::json(nullptr)},
      {"batch", r.config.batch > 0 ? nlohmann::json(r.config.batch) : nlohmann::json(nullptr)},
      {"samples_per_s", f.run.samplesPerS},
      {"bubble", orNull(f.bubble)},
      {"ideal_bubble", orNull(f.idealBubble)},
      {"stage_times_bubble", orNull(f.stageTimesBubble)},
      {"peak_rss_bytes", f.peakRssBytes},
      {"model_state_bytes", orNull(f.modelStateBytes)},
      {"peak_activation_bytes", orNull(f.peakActivationBytes)},
      {"balance", f.balance},
      {"compute_s", f.run.computeS},
      {"communicate_s", f.run.communicateS},
      {"wait_s", f.run.waitS},
      {"seconds", f.run.seconds},
      {"timed_steps", f.run.steps}};
}

std::string parallelSummaryText(const std::vector<TargetCheck>& checks) {
  return fmt::format(
      "\nbubble: the share of a step a worker spent outside its stages' compute, averaged over the "
      "workers; formula (p-1)/(m+p-1) (equal stages); stages: the bubble the measured stage times alone "
      "make (free communication), step by step; rss: the largest worker's high-water mark; state: "
      "parameters, "
      "gradients and optimizer state of the largest worker; activ: the most activation bytes a "
      "pipeline worker held\n\n{}{}\n",
      targetsText(checks), targetsTally(checks));
}

nlohmann::json parallelSummaryJson(const std::vector<TargetCheck>& checks) {
  nlohmann::json targets = nlohmann::json::array();
  for (const TargetCheck& t : checks)
    targets.push_back({{"name", t.name},
                       {"status", t.status()},
                       {"measured", t.measured ? nlohmann::json(*t.measured) : nlohmann::json(nullptr)},
                       {"threshold", t.threshold ? nlohmann::json(*t.threshold) : nlohmann::json(nullptr)},
                       {"definition", t.definition}});
  return {{"summary", true}, {"targets", targets}};
}

}  // namespace gyre::app
