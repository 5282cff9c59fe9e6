// Elastic training on libtorch: the state that survives membership changes (a model, its
// optimizer, the position in the data) and a sampler whose position is global, so the world can
// change size between any two steps. See gyre/elastic.h for run() and docs/elastic.md.
//
//   gyre::torch::ElasticSampler sampler(data.size(), globalBatch, seed);
//   gyre::torch::TorchState state(model, sgd, &sampler);
//   state.onReset([&](gyre::Communicator& c) { sampler.setWorld(c.rank(), c.size()); });
//   gyre::elastic::run(state, [&](const std::shared_ptr<gyre::Communicator>& comm) {
//     gyre::torch::DistributedOptimizer opt(comm, sgd);
//     while (sampler.epoch() < epochs) {                      // the sampler's place is state
//       ... forward on sampler.batch(), loss * sampler.weight(), backward, opt.step() ...
//       sampler.advance();                                    // before the commit that covers it
//       if (sampler.epochDone()) sampler.setEpoch(sampler.epoch() + 1);
//       if (++state.values["step"] % 10 == 0) state.commit();
//     }
//   });
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gyre/elastic.h"

namespace gyre::torch {

// Epoch e's order is the permutation DistributedSampler draws for (seed, e) with one rank. The
// job consumes it a global batch at a time: at step s, rank r of W trains on positions
// sB + r, sB + r + W, ... below (s + 1)B: with W dividing B exactly DistributedSampler's samples,
// and any W works. A partial last batch is dropped, so an epoch has floor(n / B) steps whatever W.
class ElasticSampler {
 public:
  // Throws InvalidArgument unless datasetSize >= globalBatch >= 1.
  ElasticSampler(std::int64_t datasetSize, std::int64_t globalBatch, std::uint64_t seed, bool shuffle = true);

  // This rank's place; call it from a reset callback. Throws InvalidArgument unless
  // 0 <= rank < size <= globalBatch.
  void setWorld(int rank, int size);
  // Starts epoch `epoch` (from 0) at its first step.
  void setEpoch(std::int64_t epoch);
  void setStep(std::int64_t step);  // within the epoch
  void advance() { ++step_; }

  std::int64_t epoch() const { return epoch_; }
  std::int64_t step() const { return step_; }
  std::int64_t stepsPerEpoch() const { return size_ / batch_; }
  bool epochDone() const { return step_ >= stepsPerEpoch(); }
  // This rank's sample indices of the current step (ceil or floor of B / W of them).
  std::vector<std::int64_t> batch() const;
  // This rank's share of the global batch times the world size: multiply the rank's mean loss by
  // it and the average of the ranks' gradients is the gradient of the global batch's mean loss,
  // exactly, also when W does not divide B. 1 when it does.
  double weight() const;

  // Fixed shards of every global batch, so that a lost worker changes the speed and not the
  // trajectory. With setShards(S), shard v of step s holds positions sB + v, sB + v + S, ...
  // below (s + 1)B, whatever the world; with W dividing S, rank r takes shards r·S/W to
  // (r + 1)·S/W - 1, each its own forward and backward pass (the gradients add up in .grad), so
  // every shard's gradient is computed alike in every such world. In a world of S each rank
  // takes one shard: batch() is the same as without shards. 0 (the default): no shards.
  // Throws InvalidArgument unless 0 <= S <= globalBatch.
  void setShards(int count);
  int shards() const { return shards_; }
  struct Part {
    std::vector<std::int64_t> indices;
    double weight;  // multiply the part's mean loss by it (1 / (S/W) when S divides B)
    int shard;      // which shard of the step (0 to S - 1); without shards, the rank
  };
  // This rank's part of the current step: its shards, in order; or, without shards or when W
  // does not divide S, one part, batch() with weight(). Summed as the ranks' gradients are
  // averaged, the parts' weighted gradients are the gradient of the global batch's mean loss.
  std::vector<Part> parts() const;
  // How many parts (forward and backward passes) a step of this rank has: S/W when W divides S,
  // else 1.
  int passes() const { return shards_ > 0 && shards_ % world_ == 0 ? shards_ / world_ : 1; }

 private:
  std::int64_t size_;
  std::int64_t batch_;
  std::uint64_t seed_;
  bool shuffle_;
  int rank_ = 0;
  int world_ = 1;
  int shards_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t step_ = 0;
  std::vector<std::int64_t> order_;  // epoch_'s permutation
};

// A model, its optimizer and (optionally) a sampler as an elastic::State. commit() copies the
// parameters and buffers into tensors kept for the purpose, the optimizer's state into bytes and
// the sampler's epoch and step into values ("sampler.epoch", "sampler.step"); restore() copies
// them back; sync() broadcasts them from the most advanced rank.
class TorchState : public gyre::elastic::State {
 public:
  TorchState(std::shared_ptr<::torch::nn::Module> model, std::shared_ptr<::torch::optim::Optimizer> optimizer,
             ElasticSampler* sampler = nullptr);

 protected:
  void captureValues() override;
  void saveState() override;
  void restoreState() override;
  void broadcastState(Communicator& comm, int root) override;

 private:
  void applySampler();

  std::shared_ptr<::torch::nn::Module> model_;
  std::shared_ptr<::torch::optim::Optimizer> optimizer_;
  ElasticSampler* sampler_;
  std::vector<::torch::Tensor> savedTensors_;  // parameters, then buffers
  std::string savedOptimizer_;
};

}  // namespace gyre::torch
