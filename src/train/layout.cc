#include "train/layout.h"

#include <charconv>
#include <numeric>
#include <string>

#include "common/check.h"
#include "common/compression_spec.h"
#include "common/strings.h"

namespace gyre::train {

namespace {

// What each of these would need from a split model, and why it is refused with `flag` (--pp or
// --tp) for now.
void checkCombinations(const TrainOptions& o, std::string_view flag) {
  const std::string why = " is not supported with " + std::string(flag) + " yet";
  GYRE_USAGE_CHECK(!o.plain, "--plain trains one whole model in one process: ", flag, " does not apply");
  GYRE_USAGE_CHECK(!o.elastic, "--elastic", why, " (a lost worker would take a stage away)");
  GYRE_USAGE_CHECK(!isParameterServerMode(o.mode), "--mode ", o.mode, why, " (the servers hold the whole model)");
  GYRE_USAGE_CHECK(zeroStage(o) < 3, "--zero 3", why, " (--zero 1 and 2 shard the replicas' optimizer state and gradients)");
  GYRE_USAGE_CHECK(!o.syncBn, "--sync-bn", why);
  GYRE_USAGE_CHECK(o.evalEvery == 0, "--eval-every", why, " (worker 0 holds only its stages)");
  GYRE_USAGE_CHECK(o.backupWorkers == 0 && o.stragglerRank < 0, "--backup-workers and --straggler-rank", why,
                   " (a pipeline waits for every stage)");
  GYRE_USAGE_CHECK(!o.autotune, "--autotune", why);
  GYRE_USAGE_CHECK(o.precision == "fp32", "--precision ", o.precision, why);
  const std::string kind = parseCompressionSpec(o.compression, "--compression").kind;
  GYRE_USAGE_CHECK(kind == "none" || kind == "fp16" || kind == "bf16", "--compression ", o.compression, why,
                   " (fp16 and bf16 are)");
}

// --tp: the vit's blocks split over T ranks (their heads and the MLP's hidden features).
void checkTensorParallel(const TrainOptions& o) {
  if (o.tp == 1) return;
  checkCombinations(o, "--tp");
  GYRE_USAGE_CHECK(o.model == "vit", "--tp splits the vit's transformer blocks: --model ", o.model,
                   " has none (use --model vit)");
  GYRE_USAGE_CHECK(o.vitHeads % o.tp == 0, "--tp ", o.tp, " does not divide the vit's ", o.vitHeads,
                   " heads (--vit-heads): each rank computes whole heads");
}

}  // namespace

int microBatchesOf(const TrainOptions& o) {
  return o.microBatches > 0 ? o.microBatches : 2 * o.pp;
}

int modelLayers(const TrainOptions& o) {
  if (o.model == "mlp") return 6;                   // Flatten, then Linear and ReLU twice, Linear
  if (o.model == "cnn") return o.syncBn ? 12 : 10;  // models.h
  return o.vitDepth + 2;                            // patch embedding, the blocks, the head
}

std::vector<int> explicitBalance(const TrainOptions& o) {
  if (o.balance == "even" || o.balance == "time") return {};
  std::vector<int> out;
  for (const std::string& item : split(o.balance, ',')) {
    int n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    GYRE_USAGE_CHECK(ec == std::errc() && end == item.data() + item.size() && n >= 1, "--balance '", o.balance,
                     "': expected even, time, or layer counts per stage such as 3,2,1 (each at least 1)");
    out.push_back(n);
  }
  const int stages = o.pp * o.virtualStages;
  GYRE_USAGE_CHECK(static_cast<int>(out.size()) == stages, "--balance '", o.balance, "' gives ", out.size(),
                   " stages; --pp ", o.pp, o.virtualStages > 1 ? " × --virtual-stages " + std::to_string(o.virtualStages) : "",
                   " needs ", stages);
  const int sum = std::accumulate(out.begin(), out.end(), 0);
  GYRE_USAGE_CHECK(sum == modelLayers(o), "--balance '", o.balance, "' holds ", sum, " layers, but the ", o.model,
                   " has ", modelLayers(o));
  return out;
}

void checkModelParallel(const TrainOptions& o) {
  checkTensorParallel(o);
  const bool scheduleGiven = o.schedule != "1f1b" || o.microBatches != 0 || o.virtualStages != 1 ||
                             o.balance != "even" || o.recompute;
  GYRE_USAGE_CHECK(o.pp > 1 || !scheduleGiven,
                   "--micro-batches, --schedule, --virtual-stages, --balance and --recompute shape a pipeline: "
                   "they need --pp 2 or more");
  if (o.pp == 1) return;
  checkCombinations(o, "--pp");
  GYRE_USAGE_CHECK(o.virtualStages == 1 || o.schedule == "interleaved", "--virtual-stages ", o.virtualStages,
                   " is for --schedule interleaved");
  GYRE_USAGE_CHECK(o.schedule != "interleaved" || o.virtualStages > 1,
                   "--schedule interleaved needs --virtual-stages 2 or more (stages per worker)");
  GYRE_USAGE_CHECK(o.schedule != "interleaved" || microBatchesOf(o) % o.pp == 0, "--schedule interleaved runs "
                   "micro-batches in rounds of --pp: --micro-batches ", microBatchesOf(o), " is not a multiple of ",
                   o.pp);
  const int stages = o.pp * o.virtualStages;
  GYRE_USAGE_CHECK(modelLayers(o) >= stages, "the ", o.model, " has ", modelLayers(o), " layers: too few for ",
                   stages, " pipeline stages", o.model == "vit" ? " (a deeper --vit-depth adds layers)" : "");
  (void)explicitBalance(o);
}

void checkLayout(const TrainOptions& o, int world) {
  GYRE_USAGE_CHECK(world % o.pp == 0, "--pp ", o.pp, " does not divide the ", world,
                   " workers: the workers form replicas of --pp ranks each");
  GYRE_USAGE_CHECK(world % (o.pp * o.tp) == 0, "--tp ", o.tp, o.pp > 1 ? " × --pp " + std::to_string(o.pp) : "",
                   " does not divide the ", world, " workers: the workers form replicas of ", o.pp * o.tp,
                   " ranks each");
  const int dp = world / (o.pp * o.tp);
  const std::string split = o.tp > 1 ? " × --tp " + std::to_string(o.tp) : "";
  GYRE_USAGE_CHECK(o.dp == 0 || o.dp == dp, "--dp ", o.dp, " × --pp ", o.pp, split, " is ", o.dp * o.pp * o.tp,
                   ", not the ", world, " workers");
  GYRE_USAGE_CHECK(o.batch % dp == 0, "--batch ", o.batch, " is the global batch and must divide evenly among the ",
                   dp, " data-parallel replicas: choose a multiple of ", dp);
  GYRE_USAGE_CHECK(o.pp == 1 || o.batch / dp >= microBatchesOf(o), "--micro-batches ", microBatchesOf(o),
                   " is more than the ", o.batch / dp, " samples of each replica's batch (--batch ", o.batch,
                   " over ", dp, dp == 1 ? " replica)" : " replicas)");
}

Layout layoutOf(const TrainOptions& o, int world, int rank) {
  checkLayout(o, world);
  return Layout{.dp = world / (o.pp * o.tp), .pp = o.pp, .tp = o.tp, .rank = rank};
}

}  // namespace gyre::train
