// The built-in trainer's pipeline parallelism (--pp): the layout's groups, this rank's stages,
// the bubble of each epoch, evaluation through the pipeline and the whole model gathered at the
// end. The step itself is Trainer::forwardBackward's call of Pipeline::step.
#include <algorithm>
#include <chrono>
#include <numeric>

#include "common/check.h"
#include "gyre/torch/deferred.h"
#include "train/trainer_loop.h"

namespace gyre::train::detail {

void Trainer::planBalance() {
  if (layout_.pp == 1) return;
  const int stages = o_.pp * o_.virtualStages;
  if (o_.balance == "even") {
    balance_ = gyre::torch::balanceEvenly(modelLayers(o_), stages);
    return;
  }
  if (o_.balance != "time") {
    balance_ = explicitBalance(o_);
    return;
  }
  // Measured on rank 0 alone, on a micro-batch, so that every rank cuts the same way: the model
  // drawn layer by layer, each layer timed on what the one before gave and given back at once (so
  // that a model larger than one worker is never whole), the unsplit layers with --tp (rank 0
  // alone cannot run a tensor-parallel one). The constructor draws the model again from the seed.
  std::vector<std::int64_t> counts(static_cast<std::size_t>(stages));
  if (group_.rank() == 0) {
    std::vector<std::int64_t> first(
        static_cast<std::size_t>(std::max<std::int64_t>(perRankBatch_ / microBatchesOf(o_), 1)));
    std::iota(first.begin(), first.end(), 0);
    gyre::torch::LayerTimer timer(data_.train->gather(first, 0).images);
    std::vector<double> seconds;
    makeModel(o_.model, o_.syncBn, vitOptions(), shape_, [&](std::size_t /*child*/, ::torch::nn::AnyModule& made) {
      seconds.push_back(timer.time(made));
      gyre::torch::releaseParameters(*made.ptr());
    });
    const std::vector<int> b = gyre::torch::balanceByCost(seconds, stages);
    std::copy(b.begin(), b.end(), counts.begin());
  }
  // The others wait for the whole draw and its timing (longer than a collective's default time-out
  // for a large model); a rank 0 that dies is seen at once all the same.
  group_.comm()->broadcast(counts.data(), counts.size(),
                           {.dtype = DataType::kInt64, .root = 0, .timeout = Timeout{std::chrono::minutes(10)}});
  balance_.assign(counts.begin(), counts.end());
}

ChildMade Trainer::planDeferredStages() {
  if (layout_.pp == 1 || layout_.tp > 1) return {};
  return [this](std::size_t child, ::torch::nn::AnyModule& made) {
    if (!ownsLayer(child)) gyre::torch::releaseParameters(*made.ptr());
  };
}

bool Trainer::ownsLayer(std::size_t child) const {
  std::size_t first = 0;
  for (std::size_t g = 0; g < balance_.size(); ++g) {
    first += static_cast<std::size_t>(balance_[g]);
    if (child < first) return static_cast<int>(g) % layout_.pp == layout_.stageRank();
  }
  return false;
}

void Trainer::releaseOthersStages() {
  for (std::size_t c = 0; c < model_->size(); ++c)
    if (!ownsLayer(c)) gyre::torch::releaseParameters(*model_->ptr(c));
}

void Trainer::attachPipeline() {
  const int m = microBatchesOf(o_);
  timeline_ = gyre::torch::Timeline::fromEnvironment(group_.comm());
  gyre::torch::PipelineOptions p;
  p.microBatches = m;
  p.schedule = gyre::torch::pipelineScheduleFrom(o_.schedule);
  p.recompute = o_.recompute;
  p.timeline = timeline_;
  pipeline_ = std::make_unique<gyre::torch::Pipeline>(
      gyre::torch::stagesOf(model_, balance_, layout_.stageRank(), o_.pp), pipeComm_, p);
  // A checkpoint part holds this rank's stages alone (under their names in the whole model; with
  // --tp, its shares of them).
  ownLayers_ = gyre::torch::namedStageLayers(model_, balance_, layout_.stageRank(), o_.pp);
}

void Trainer::splitMesh() {
  // The groups of the dp × pp × tp mesh (layout.h), split in one order on every rank: a stage's
  // tensor-parallel group (T neighbours), a pipeline (the same tensor-parallel rank of each stage
  // of a replica), and the data-parallel group of a share (its replicas).
  Communicator& world = *group_.comm();
  const int tp = layout_.tpRank(), stage = layout_.stageRank(), replica = layout_.replica();
  if (layout_.tp > 1) tensorComm_ = world.split(replica * layout_.pp + stage, tp);
  if (layout_.pp > 1) pipeComm_ = world.split(replica * layout_.tp + tp, stage);
  dataParallelComm_ = world.split(stage * layout_.tp + tp, replica);
}

void Trainer::notePipelineStep() {
  const gyre::torch::PipelineStepStats& s = pipeline_->lastStep();
  pipelineStepS_ += s.seconds;
  pipelineStepBusyS_.push_back(s.busySeconds);
  peakActivationBytes_ = std::max(peakActivationBytes_, s.peakActivationBytes);
}

void Trainer::recordPipelineEpoch(EpochRecord& report) {
  if (!pipeline_) return;
  PipelineRecord r;
  r.pp = layout_.pp;
  r.dp = layout_.dp;
  r.microBatches = pipeline_->options().microBatches;
  r.schedule = o_.schedule;
  r.balance = balance_;
  const double busyS = std::accumulate(pipelineStepBusyS_.begin(), pipelineStepBusyS_.end(), 0.0);
  const double bubble = pipelineStepS_ > 0 ? 1.0 - busyS / pipelineStepS_ : 0;
  r.bubble = group_.mean({bubble})[0];
  r.idealBubble = gyre::torch::idealBubble(pipeline_->options().schedule, layout_.pp, r.microBatches, o_.virtualStages);
  stageTimesOfEpoch(r);
  r.peakActivationBytes = static_cast<std::int64_t>(group_.max({static_cast<double>(peakActivationBytes_)})[0]);
  report.pipeline = std::move(r);
}

void Trainer::stageTimesOfEpoch(PipelineRecord& r) {
  // Every rank of a pipeline ran the same steps: each step's compute seconds of every rank, step
  // by step, so that a core slower for a while counts in the steps it was slow.
  const int p = layout_.pp, m = r.microBatches;
  const std::size_t steps = pipelineStepBusyS_.size();
  std::vector<double> all(steps * static_cast<std::size_t>(p));
  if (steps > 0) pipeComm_->allgather(pipelineStepBusyS_.data(), all.data(), steps, {DataType::kFloat64});
  std::vector<double> perMicroBatch(static_cast<std::size_t>(p));
  std::vector<double> mean(static_cast<std::size_t>(p) + 1, 0.0);  // each rank's, then the bubble
  double stepS = 0, idleS = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    double busy = 0;
    for (std::size_t k = 0; k < perMicroBatch.size(); ++k) {
      perMicroBatch[k] = all[k * steps + s] / m;
      busy += all[k * steps + s];
      mean[k] += perMicroBatch[k] / static_cast<double>(steps);
    }
    const double bubble = gyre::torch::stageTimesBubble(perMicroBatch, m, o_.virtualStages);
    const double step = busy / (p * (1 - bubble));
    stepS += step;
    idleS += bubble * step;
  }
  mean.back() = stepS > 0 ? idleS / stepS : 0;
  mean = group_.mean(mean);  // over the replicas
  r.stageTimesBubble = mean.back();
  r.stageMs.clear();
  for (int k = 0; k < p; ++k) r.stageMs.push_back(1e3 * mean[static_cast<std::size_t>(k)]);
}

double Trainer::pipelineTestAccuracy() {
  // Each replica evaluates its share of the test set; its last stage counts.
  const gyre::data::Dataset& test = data_.test;
  const auto [first, last] = testShare(layout_.replica(), layout_.dp);
  double correct = 0;
  model_->eval();
  for (std::int64_t b = first; b < last; b += kEvalChunk) {
    const std::int64_t e = std::min(b + kEvalChunk, last);
    const ::torch::Tensor logits = pipeline_->forward(test.images.slice(0, b, e));
    if (logits.defined() && layout_.tpRank() == 0)
      correct += static_cast<double>(logits.argmax(1).eq(test.labels.slice(0, b, e)).sum().item<std::int64_t>());
  }
  model_->train();
  // The last stage counts (with --tp, its first rank: the group computes the same predictions).
  return accuracyOver(correct,
                     pipeline_->holdsLastStage() && layout_.tpRank() == 0 ? static_cast<double>(last - first) : 0);
}

void Trainer::gatherPipelineStages() {
  // No worker holds the whole model but worker 0, once training is done, for model.pt: each worker
  // of replica 0's first stage receives the other stages (with --tp, its shares of them, which
  // gatherTensorParallel then joins), once what its own stages needed to train is gone.
  if (layout_.replica() != 0) return;
  if (layout_.stageRank() == 0) dropTrainingState(pipeline_->parameters());
  gyre::torch::gatherStagesOnto(model_, balance_, *pipeComm_, 0);
}

}  // namespace gyre::train::detail
