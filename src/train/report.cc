#include "train/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "gyre/ps.h"
#include "gyre/version.h"
#include "train/checkpoint_rules.h"
#include "train/layout.h"

namespace gyre::train {
namespace {

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

std::string formatEpochLine(const EpochRecord& r) {
  std::string line = "epoch " + std::to_string(r.epoch) + "/" + std::to_string(r.epochs);
  line += "  loss " + format("%.4f", r.loss);
  if (r.testAccuracy) line += "  test acc " + format("%.2f%%", 100 * *r.testAccuracy);
  line += "  " + format("%.0f", r.samplesPerS) + " samples/s";
  if (r.droppedGradients && *r.droppedGradients > 0)
    line += "  dropped " + std::to_string(*r.droppedGradients) + " gradients (backup workers)";
  if (r.speedup) line += "  speedup " + format("%.2f", *r.speedup);
  if (r.efficiency) line += "  efficiency " + format("%.2f", *r.efficiency);
  const double step = r.computeS + r.waitS;
  if (!r.plain && step > 0) {
    auto percent = [&](double part) { return format("%.0f%%", 100 * part / step); };
    line += "  step: data " + format("%.1f%%", 100 * r.dataWaitS / step) + " compute " +
            percent(r.computeS - r.dataWaitS) + " comm " + percent(r.communicateS) + " (hidden " +
            percent(r.hiddenS) + ") wait " + percent(r.waitS);
  }
  if (r.pipeline)
    line += "  pipeline " + r.pipeline->schedule + " m=" + std::to_string(r.pipeline->microBatches) + ": bubble " +
            format("%.1f%%", 100 * r.pipeline->bubble) + " (formula " +
            format("%.1f%%", 100 * r.pipeline->idealBubble) + ", " +
            format("%.1f%%", 100 * r.pipeline->stageTimesBubble) + " with the measured stages)";
  return line;
}

std::string toJsonLine(const EpochRecord& r) {
  return toJson(r).dump();
}

std::vector<std::uint64_t> trimTrailingZeros(std::vector<std::uint64_t> histogram) {
  while (!histogram.empty() && histogram.back() == 0) histogram.pop_back();
  return histogram;
}

std::string formatStaleness(const std::vector<std::uint64_t>& histogram) {
  const ps::StalenessSummary s = ps::summarizeStaleness(histogram);
  if (s.updates == 0) return "staleness: no updates";
  return "staleness: mean " + format("%.2f", s.mean) + ", p50 " + std::to_string(s.p50) + ", p99 " +
         std::to_string(s.p99) + ", max " + std::to_string(s.max) + (s.saturated ? "+" : "") + " over " +
         std::to_string(s.updates) + " updates";
}

std::string stepJsonLine(std::int64_t step, int epoch, double loss, double lr) {
  return toJson(StepRecord{step, epoch, loss, lr}).dump();
}

std::string configJson(const TrainOptions& o, int world, double lr, int torchThreads,
                       const std::vector<int>& stageLayers, const ModelShape& shape, const DataFigures& data) {
  // First the fields a resume compares (records.h: CheckpointConfig), then the rest.
  CheckpointConfig resume = checkpointConfigOf(o, world);
  if (o.pp > 1) resume.stageLayers = stageLayers;
  nlohmann::ordered_json j = toJson(resume);
  j["gyre_version"] = kVersion;
  if (o.model == "vit")  // what a server needs to build the model again (gyre serve)
    j["vit"] = {{"depth", o.vitDepth}, {"width", o.vitWidth}, {"heads", o.vitHeads}, {"patch", o.vitPatch}};
  j["input_shape"] = {shape.channels, shape.height, shape.width};
  j["classes"] = shape.classes;
  if (!data.mean.empty()) j["normalize"] = {{"mean", data.mean}, {"std", data.std}};  // x -> (x - mean) / std
  if (!data.classNames.empty()) j["class_names"] = data.classNames;
  j["plain"] = o.plain;
  j["epochs"] = o.epochs;
  j["per_rank_batch"] =
      o.batch /
      (world / (o.pp * o.tp));  // a pipeline's (or tensor-parallel group's) ranks share their replica's batch
  if (o.pp > 1) {
    j["micro_batches"] = microBatchesOf(o);
    j["schedule"] = o.schedule;
    j["balance"] = o.balance;
    j["recompute"] = o.recompute;
  }
  j["lr"] = o.lr;
  j["lr_scaled"] = lr;
  j["lr_scaling"] = o.lrScaling;
  j["warmup_epochs"] = o.warmupEpochs;
  j["lr_schedule"] = o.lrSchedule;
  j["momentum"] = o.momentum;
  j["weight_decay"] = o.weightDecay;
  j["compression"] = o.compression;
  j["precision"] = o.precision;
  j["shard_optimizer"] = o.shardOptimizer;
  j["data_dir"] = o.dataDir;
  if (!o.data.empty()) j["data"] = o.data;
  j["max_steps"] = o.maxSteps;
  j["skip_steps"] = o.skipSteps;
  j["eval"] = o.eval;
  j["torch_threads"] = torchThreads;
  j["data_workers"] = o.dataWorkers;
  j["reference_samples_per_s"] =
      o.referenceSamplesPerS > 0 ? nlohmann::json(o.referenceSamplesPerS) : nullptr;
  j["checkpoint_dir"] = o.checkpointDir;
  j["checkpoint_every"] = o.checkpointEvery;
  j["keep_last"] = o.keepLast;
  j["resume"] = o.resume;
  j["stop_at_step"] = o.stopAtStep;
  j["mode"] = o.mode;
  j["straggler_rank"] = o.stragglerRank;
  j["straggler_factor"] = o.stragglerFactor;
  j["straggler_cpu"] = o.stragglerCpu;
  j["backup_workers"] = o.backupWorkers;
  j["autotune"] = o.autotune;
  j["allreduce"] = o.allreduce;
  j["eval_every"] = o.evalEvery;
  return j.dump(2) + "\n";
}

}  // namespace gyre::train
