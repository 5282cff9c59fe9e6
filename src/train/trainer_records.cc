// Trainer's records: the epoch lines and metrics.jsonl, steps.jsonl, model.pt, the checkpoints
// and the lines that announce them; eval.jsonl (TrainOptions::evalEvery); each epoch's memory.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "common/files.h"
#include "gyre/torch/deferred.h"
#include "torch/optimizer_bytes.h"
#include "train/checkpoint_relayout.h"  // kShardLayoutValue
#include "train/live_metrics.h"
#include "train/optimizer_choice.h"
#include "train/report.h"
#include "train/run_files.h"
#include "train/trainer_loop.h"

namespace gyre::train::detail {

void Trainer::resume() {
  // The whole model and where this rank's flats or shares lie in it let a checkpoint of another
  // layout resume (--zero 3 builds a whole model to load into, its model_'s parameters being views
  // of shards gathered only for a forward pass; --tp's model_ is a share of wholeModel_).
  ResumeTarget target;
  if (layout_.tp > 1) {
    target.whole = wholeModel_;
    target.share = ResumeTarget::TensorParallelShare{model_, tensorComm_->size(), tensorComm_->rank()};
  } else {
    target.whole = model_;
    if (fsdp_ && o_.resume && !o_.checkpointDir.empty()) {
      withGeneratorPutBack([&] { target.whole = makeModel(o_.model, o_.syncBn, vitOptions(), shape_); });
    }
    if (fsdp_) {
      target.flats = fsdp_->shardLayout(model_->parameters());
      target.flatValues = true;
    }
  }
  // --zero 1 and 2: this rank's flats over the parameters of model_ (the whole model, or with --tp
  // this rank's share of it; with --pp its stages' alone).
  if (dist_ && (zeroStage(o_) == 1 || zeroStage(o_) == 2))
    if (gyre::torch::FlatLayout flats = dist_->stateLayout(model_->parameters()); !flats.empty())
      target.flats = std::move(flats);
  if (target.flats) shardLayout_ = gyre::torch::flatLayoutText(*target.flats);
  start_ = checkpoints_.start(checkpointModel(), checkpointOptimizer(), config_, &target);
  // A checkpoint of another layout filled the whole model.
  if (layout_.pp > 1) releaseOthersStages();
  if (deferredWhole_) gyre::torch::releaseParameters(*wholeModel_);
  globalStep_ = start_.step;
  // The flags rule from the restored step on: the rate is set at every step, the others here.
  applyOptimizerFlags(o_, *optimizer_);
}

void Trainer::saveCheckpoint(int epoch, std::int64_t done, std::vector<CheckpointSave>& saves) {
  gyre::torch::CheckpointState state;
  state.step = globalStep_;
  const bool epochDone = done >= stepsPerEpoch_;
  state.epoch = epochDone ? epoch : epoch - 1;
  state.sampler = {state.epoch, epochDone ? 0 : done * o_.batch};
  state.scheduleStep = globalStep_;
  state.lr = optimizer_->param_groups().front().options().get_lr();
  state.config = config_;
  if (!shardLayout_.empty()) state.values[kShardLayoutValue] = shardLayout_;
  const std::optional<CheckpointSave> saved = checkpoints_.save(checkpointModel(), checkpointOptimizer(), state);
  if (!saved) return;
  progress_.finish();
  std::printf("checkpoint at step %lld: %.2f MB, training stalled %.1f ms (%s, written in the background)\n",
              static_cast<long long>(saved->step), static_cast<double>(saved->bytes) / 1e6,
              saved->stallS * 1e3, saved->path.c_str());
  std::fflush(stdout);
  saves.push_back(*saved);
}

void Trainer::announceStart() {
  if (!checkpoints_.enabled()) return;
  // A generation started by --max-restarts says so first.
  const std::string restart = o_.restartCount > 0 ? "restart " + std::to_string(o_.restartCount) + ": " : "";
  if (start_.path.empty()) {
    if (o_.resume)
      std::printf("%sno valid checkpoint in %s: starting from step 0\n", restart.c_str(),
                  o_.checkpointDir.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%sresumed from %s: step %lld, epoch %lld/%d from its step %lld of %lld\n", restart.c_str(),
              start_.path.c_str(), static_cast<long long>(start_.step),
              static_cast<long long>(start_.epoch + 1), o_.epochs,
              static_cast<long long>(start_.index / o_.batch), static_cast<long long>(stepsPerEpoch_));
  if (start_.epoch >= o_.epochs)
    std::printf("the checkpoint is at the end of training: nothing left to train\n");
  std::fflush(stdout);
  if (o_.runDir.empty()) return;
  // The run directory's records up to the checkpoint stay; this run writes what comes after.
  const std::filesystem::path dir(o_.runDir);
  metricsText_ = epochLinesUpTo((dir / "metrics.jsonl").string(), start_.epoch);
  stepsText_ = stepLinesUpTo((dir / "steps.jsonl").string(), start_.step);
}

void Trainer::flushSteps() {
  if (steps_.empty()) return;
  const std::vector<double> losses = group_.mean(stepLosses_);
  // Elastic: every rank keeps the records, since any of them may become rank 0.
  if ((group_.rank() == 0 || o_.elastic) && !o_.runDir.empty()) {
    for (std::size_t i = 0; i < steps_.size(); ++i)
      stepsText_ += stepJsonLine(steps_[i].step, steps_[i].epoch, losses[i], steps_[i].lr) + "\n";
    if (group_.rank() == 0)
      files::writeAtomically((std::filesystem::path(o_.runDir) / "steps.jsonl").string(), stepsText_);
  }
  steps_.clear();
  stepLosses_.clear();
}

std::optional<double> Trainer::epochLoss(int epoch) const {
  // Elastic: every rank keeps the committed steps' records, whichever world trained them.
  if (o_.runDir.empty() || (group_.rank() != 0 && !o_.elastic)) return std::nullopt;
  double sum = 0;
  std::int64_t count = 0;
  std::istringstream in(stepsText_);
  for (std::string line; std::getline(in, line);) {
    const std::optional<train::StepRecord> step = parseStepRecord(line);  // this run's own lines
    if (!step || step->epoch != epoch) continue;
    sum += step->loss;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / static_cast<double>(count);
}

void Trainer::publish(const EpochRecord& report) {
  std::printf("%s\n", formatEpochLine(report).c_str());
  const std::string json = toJsonLine(report);
  if (o_.json) std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  recordEpoch(report);
}

void Trainer::recordEpoch(const EpochRecord& report) {
  if (live_) live_->epoch(report);
  if (o_.runDir.empty()) return;
  metricsText_ += toJsonLine(report) + "\n";
  if (group_.rank() == 0)
    files::writeAtomically((std::filesystem::path(o_.runDir) / "metrics.jsonl").string(), metricsText_);
}

void Trainer::maybeSnapshot() {
  if (o_.evalEvery == 0 || globalStep_ % o_.evalEvery != 0 || o_.runDir.empty()) return;
  if (group_.rank() != 0 && !o_.elastic) return;
  // Only a copy here (well under a millisecond for the built-in models), no collective: the other
  // workers are not held up in any mode. writeEvaluations() evaluates it after training.
  const auto begin = std::chrono::steady_clock::now();
  EvalSnapshot snapshot;
  snapshot.step = globalStep_;
  snapshot.timeS = std::chrono::duration<double>(begin - trainStart_).count() - evalS_;
  ::torch::NoGradGuard noGrad;
  for (const ::torch::Tensor& p : model_->parameters()) snapshot.state.push_back(p.detach().clone());
  for (const ::torch::Tensor& b : model_->buffers()) snapshot.state.push_back(b.detach().clone());
  evalSnapshots_.push_back(std::move(snapshot));
  evalS_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

void Trainer::writeEvaluations() {
  if (o_.evalEvery == 0 || o_.runDir.empty() || group_.rank() != 0) {
    evalSnapshots_.clear();
    return;
  }
  // Rank 0 alone, on the whole test set, each snapshot in a copy of the model (model_ stays the
  // final one, for model.pt). Written whole, so eval.jsonl is this run's, even when it is empty.
  std::stable_sort(evalSnapshots_.begin(), evalSnapshots_.end(),
                   [](const EvalSnapshot& a, const EvalSnapshot& b) { return a.step < b.step; });
  ::torch::nn::Sequential model(std::dynamic_pointer_cast<::torch::nn::SequentialImpl>(model_->clone()));
  std::vector<::torch::Tensor> state = model->parameters();
  for (const ::torch::Tensor& b : model->buffers()) state.push_back(b);
  const std::int64_t n = data_.test.size();
  std::string text;
  for (const EvalSnapshot& snapshot : evalSnapshots_) {
    {
      ::torch::NoGradGuard noGrad;
      for (std::size_t i = 0; i < state.size(); ++i) state[i].copy_(snapshot.state[i]);
    }
    const double accuracy = n > 0 ? correctPredictions(model, 0, n) / static_cast<double>(n) : 0;
    text += toJson(EvalRecord{snapshot.step, snapshot.timeS, accuracy}).dump() + "\n";
  }
  evalSnapshots_.clear();
  files::writeAtomically((std::filesystem::path(o_.runDir) / "eval.jsonl").string(), text);
}

void Trainer::recordMemory(EpochRecord& report) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double state = -1;
  if (fsdp_) {  // the shards and their gradients, and the optimizer's state over the shards
    state = static_cast<double>(fsdp_->stateBytes() + gyre::torch::optimizerStateTensorBytes(*optimizer_));
  } else if (dist_ && zeroStage(o_) > 0) {  // the state of the shard optimizer, not the wrapped one's
    state = static_cast<double>(dist_->stateBytes());
  } else if (zeroStage(o_) == 0 && !ps_) {
    std::int64_t bytes = 0;
    for (const ::torch::Tensor& p : pipeline_ ? pipeline_->parameters() : model_->parameters()) {
      const std::int64_t size = p.numel() * static_cast<std::int64_t>(p.element_size());
      bytes += p.grad().defined() ? 2 * size : size;
    }
    bytes += static_cast<std::int64_t>(gyre::torch::optimizerStateTensorBytes(*optimizer_));
    state = static_cast<double>(bytes);
  }
  const std::vector<double> most = group_.max(
      {static_cast<double>(usage.ru_maxrss) * 1024.0, state, static_cast<double>(heldParameterBytes())});  // ru_maxrss: KiB
  report.peakRssBytes = static_cast<std::int64_t>(most[0]);
  if (most[1] >= 0) report.modelStateBytes = static_cast<std::int64_t>(most[1]);
  report.parameterBytes = static_cast<std::int64_t>(most[2]);
}

std::int64_t Trainer::heldParameterBytes() const {
  // A tensor released (deferred.h) holds none; ZeRO's buckets and views share a storage.
  std::set<const void*> seen;
  std::int64_t bytes = 0;
  auto add = [&](const std::vector<::torch::Tensor>& tensors) {
    for (const ::torch::Tensor& t : tensors)
      if (t.defined() && t.numel() > 0 && gyre::torch::isMaterialised(t) && seen.insert(t.storage().data()).second)
        bytes += static_cast<std::int64_t>(t.storage().nbytes());
  };
  for (const ::torch::nn::Sequential& model : {model_, wholeModel_}) {
    if (!model) continue;
    add(model->parameters());
    add(model->buffers());
  }
  if (fsdp_) add(fsdp_->parameters());
  return bytes;
}

void Trainer::saveModel() {
  const std::string path = (std::filesystem::path(o_.runDir) / "model.pt").string();
  const std::string temporary = files::temporaryPath(path);
  try {
    ::torch::save(wholeModel_ ? wholeModel_ : model_, temporary);
  } catch (const c10::Error& e) {
    std::filesystem::remove(temporary);
    throw Error("cannot write " + path + ": " + e.what_without_backtrace());
  }
  files::commit(temporary, path);
}

}  // namespace gyre::train::detail
