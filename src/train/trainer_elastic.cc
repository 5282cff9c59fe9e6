// The built-in trainer under `gyre run --elastic` (TrainOptions::elastic): the epochs run inside
// gyre::elastic::run, so a lost worker rolls the survivors back to the last commit and a new
// worker joins at the next one. What depends on the world (the communicator, the
// DistributedOptimizer, the learning rate, the sampler's shard, who writes the run directory) is
// rebuilt by attach() at every membership; the model, the optimizer's state and the position in
// the data are the elastic state. docs/elastic.md.
#include <filesystem>

#include "common/files.h"
#include "gyre/elastic.h"
#include "gyre/torch/sync_batch_norm.h"
#include "train/live_metrics.h"
#include "train/run_files.h"
#include "train/trainer_loop.h"

namespace gyre::train::detail {
namespace {

constexpr const char* kGlobalStep = "global_step";

}  // namespace

void Trainer::attach(std::shared_ptr<Communicator> comm) {
  dist_.reset();  // the previous membership's buckets and hooks, before the new ones
  group_ = Group(std::move(comm));
  gyre::torch::setSyncBatchNormCommunicator(*model_, group_.comm());
  world_ = group_.size();
  perRankBatch_ = o_.batch / world_;  // nominal: ranks below batch % world take one more
  elasticSampler_->setWorld(group_.rank(), world_);
  // The learning-rate rule, applied to the new world (the identity unless --lr-scaling).
  lr_ = gyre::torch::scaleLearningRate(o_.lr, world_, gyre::torch::parseLrScaling(o_.lrScaling));
  planWarmup();
  if (world_ > 1) {
    gyre::torch::DistributedOptimizerOptions d = distributedOptions();
    // The shards' gradients add up in .grad; the ranks average the sums.
    d.backwardPassesPerStep = elasticSampler_->passes();
    dist_ = std::make_unique<gyre::torch::DistributedOptimizer>(group_.comm(), optimizer_, d);
    autotune_.reset();  // tuned again for the new membership
    // Ranks are renumbered: each membership's history starts afresh.
    if (o_.stragglerThreshold > 0) stragglers_.emplace(o_.stragglerThreshold);
  }
  // Rank 0 of each membership draws the bar and continues progress.jsonl; the first membership's
  // empties it. (Not at a worker's start: a replacement starts while the others are writing it.)
  progress_ = ProgressBar(group_.rank() == 0 && progressEnabled(o_.progress));
  stepLog_ = StepLog();
  // Rank 0 of each membership serves the metrics (a port on its host; the job's port moves with it).
  live_.reset();
  // Mid-job, a port still held (the former rank 0 on this host, on its way out) must not end this
  // worker: it trains on without serving.
  if (group_.rank() == 0 && o_.metricsPort > 0) {
    try {
      live_ = std::make_unique<LiveMetrics>(o_.metricsPort, group_.size(), o_.restartCount, o_.batch);
    } catch (const Error& e) {
      if (elasticState_->membership() <= 1) throw;
      std::fprintf(stderr, "gyre train: warning: no metrics in membership %lld: %s\n",
                   static_cast<long long>(elasticState_->membership()), e.what());
    }
  }
  if (group_.rank() == 0 && !o_.runDir.empty()) {
    // One writer at a time: the files' temporary names are shared by every process.
    files::writeAtomically((std::filesystem::path(o_.runDir) / "config.json").string(), config_);
    stepLog_ = StepLog((std::filesystem::path(o_.runDir) / "progress.jsonl").string(),
                       elasticState_->membership() > 1);
    stepLog_.start(static_cast<int>(elasticState_->membership()), globalStep_);
  }
}

void Trainer::maybeCommit() {
  if (globalStep_ % o_.commitEvery != 0) return;
  flushSteps();  // the records of the committed steps, on every rank
  elasticState_->values[kGlobalStep] = globalStep_;
  elasticState_->commit();
}

std::vector<EpochRecord> Trainer::runElastic() {
  // Every worker may become rank 0 and write the run directory (attach()).
  if (!o_.runDir.empty()) createRunDirectory(o_.runDir);
  gyre::torch::TorchState state(model_.ptr(), optimizer_, &*elasticSampler_);
  state.values[kGlobalStep] = 0;
  elasticState_ = &state;
  state.onReset([&](Communicator&) {
    globalStep_ = state.values[kGlobalStep];
    // Records of steps after the commit are rolled back with it.
    steps_.clear();
    stepLosses_.clear();
    std::erase_if(evalSnapshots_, [&](const EvalSnapshot& e) { return e.step > globalStep_; });
  });
  std::vector<EpochRecord> reports;
  gyre::elastic::run(state, [&](const std::shared_ptr<Communicator>& comm) {
    attach(comm);
    if (group_.rank() == 0)
      std::printf("elastic: membership %lld: %d worker%s, from global step %lld\n",
                  static_cast<long long>(state.membership()), world_, world_ == 1 ? "" : "s",
                  static_cast<long long>(globalStep_));
    std::fflush(stdout);
    while (elasticSampler_->epoch() < o_.epochs) {
      const int epoch = static_cast<int>(elasticSampler_->epoch()) + 1;
      EpochRecord report = trainEpoch(epoch, elasticSampler_->step());
      reports.push_back(std::move(report));
      if (group_.rank() == 0) {
        publish(reports.back());
      } else {
        recordEpoch(reports.back());
      }
      elasticSampler_->setEpoch(epoch);
      state.values[kGlobalStep] = globalStep_;
      state.commit();
    }
  });
  elasticState_ = nullptr;
  writeEvaluations();
  if (group_.rank() == 0 && !o_.runDir.empty()) saveModel();
  return reports;
}

}  // namespace gyre::train::detail
