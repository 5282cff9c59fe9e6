#include "gyre/torch/elastic.h"

#include <algorithm>

#include "common/check.h"
#include "gyre/torch/broadcast.h"
#include "gyre/torch/sampler.h"
#include "torch/optimizer_bytes.h"

namespace gyre::torch {
namespace {

std::vector<::torch::Tensor> stateTensors(::torch::nn::Module& model) {
  std::vector<::torch::Tensor> tensors = model.parameters();
  for (const auto& b : model.buffers()) tensors.push_back(b);
  return tensors;
}

}  // namespace

ElasticSampler::ElasticSampler(std::int64_t datasetSize, std::int64_t globalBatch, std::uint64_t seed, bool shuffle)
    : size_(datasetSize), batch_(globalBatch), seed_(seed), shuffle_(shuffle) {
  GYRE_USAGE_CHECK(globalBatch >= 1, "ElasticSampler: the global batch must be at least 1, not ", globalBatch);
  GYRE_USAGE_CHECK(datasetSize >= globalBatch, "ElasticSampler: the global batch ", globalBatch,
                   " is larger than the ", datasetSize, " samples");
  setEpoch(0);
}

void ElasticSampler::setWorld(int rank, int size) {
  GYRE_USAGE_CHECK(size >= 1 && rank >= 0 && rank < size, "ElasticSampler: rank ", rank, " is not in [0, ", size,
                   ")");
  GYRE_USAGE_CHECK(size <= batch_, "ElasticSampler: ", size, " workers cannot share a global batch of ", batch_);
  rank_ = rank;
  world_ = size;
}

void ElasticSampler::setEpoch(std::int64_t epoch) {
  GYRE_USAGE_CHECK(epoch >= 0, "ElasticSampler: epochs count from 0, not ", epoch);
  if (order_.empty() || epoch != epoch_) {
    DistributedSamplerOptions o;
    o.shuffle = shuffle_;
    o.seed = seed_;
    DistributedSampler all(size_, 1, 0, o);
    all.setEpoch(epoch);
    order_ = all.indices();
  }
  epoch_ = epoch;
  step_ = 0;
}

void ElasticSampler::setStep(std::int64_t step) {
  GYRE_USAGE_CHECK(step >= 0 && step <= stepsPerEpoch(), "ElasticSampler: step ", step, " is not in [0, ",
                   stepsPerEpoch(), "]");
  step_ = step;
}

std::vector<std::int64_t> ElasticSampler::batch() const {
  std::vector<std::int64_t> mine;
  if (epochDone()) return mine;
  const std::int64_t end = (step_ + 1) * batch_;
  mine.reserve(static_cast<std::size_t>(batch_ / world_ + 1));
  for (std::int64_t p = step_ * batch_ + rank_; p < end; p += world_) mine.push_back(order_[static_cast<std::size_t>(p)]);
  return mine;
}

double ElasticSampler::weight() const {
  const std::int64_t count = (batch_ - rank_ + world_ - 1) / world_;
  return static_cast<double>(count * world_) / static_cast<double>(batch_);
}

void ElasticSampler::setShards(int count) {
  GYRE_USAGE_CHECK(count >= 0 && count <= batch_, "ElasticSampler: ", count, " shards of a global batch of ",
                   batch_, ": expected 0 (none) to ", batch_);
  shards_ = count;
}

std::vector<ElasticSampler::Part> ElasticSampler::parts() const {
  std::vector<Part> parts;
  if (epochDone()) return parts;
  if (shards_ == 0 || shards_ % world_ != 0) {
    parts.push_back({batch(), weight(), rank_});
    return parts;
  }
  const int perRank = passes();
  const std::int64_t end = (step_ + 1) * batch_;
  for (int v = rank_ * perRank; v < (rank_ + 1) * perRank; ++v) {
    Part part;
    part.shard = v;
    for (std::int64_t p = step_ * batch_ + v; p < end; p += shards_) part.indices.push_back(order_[static_cast<std::size_t>(p)]);
    // The shard's samples of the global batch, times the world: 1 / perRank when S divides B.
    part.weight = static_cast<double>(part.indices.size()) * world_ / static_cast<double>(batch_);
    parts.push_back(std::move(part));
  }
  return parts;
}

TorchState::TorchState(std::shared_ptr<::torch::nn::Module> model, std::shared_ptr<::torch::optim::Optimizer> optimizer,
                       ElasticSampler* sampler)
    : model_(std::move(model)), optimizer_(std::move(optimizer)), sampler_(sampler) {
  GYRE_USAGE_CHECK(model_ != nullptr && optimizer_ != nullptr, "TorchState needs a model and an optimizer");
  captureValues();
}

void TorchState::captureValues() {
  if (sampler_ == nullptr) return;
  values["sampler.epoch"] = sampler_->epoch();
  values["sampler.step"] = sampler_->step();
}

void TorchState::applySampler() {
  if (sampler_ == nullptr) return;
  sampler_->setEpoch(values.at("sampler.epoch"));
  sampler_->setStep(values.at("sampler.step"));
}

void TorchState::saveState() {
  ::torch::NoGradGuard noGrad;
  const std::vector<::torch::Tensor> tensors = stateTensors(*model_);
  if (savedTensors_.size() != tensors.size()) {
    savedTensors_.clear();
    for (const auto& t : tensors) savedTensors_.push_back(t.detach().clone());
  } else {
    for (std::size_t i = 0; i < tensors.size(); ++i) savedTensors_[i].copy_(tensors[i]);
  }
  savedOptimizer_ = optimizerStateBytes(*optimizer_);
}

void TorchState::restoreState() {
  ::torch::NoGradGuard noGrad;
  const std::vector<::torch::Tensor> tensors = stateTensors(*model_);
  GYRE_ENFORCE_EQ(tensors.size(), savedTensors_.size(), "the model changed shape since its commit");
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(savedTensors_[i]);
  loadOptimizerStateBytes(*optimizer_, savedOptimizer_, "the elastic commit");
  applySampler();
}

void TorchState::broadcastState(Communicator& comm, int root) {
  broadcastParameters(*model_, comm, root);
  broadcastOptimizerState(*optimizer_, comm, root);
  applySampler();
}

}  // namespace gyre::torch
