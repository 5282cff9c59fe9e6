// The built-in trainer in a parameter-server mode (TrainOptions::mode "ps:bsp", "ps:asp",
// "ps:ssp:S", under `gyre run --servers S`): a PSOptimizer in place of the DistributedOptimizer.
// The servers hold the model and apply SGD with the trainer's momentum; the rate of each step
// travels with its pushes. gyre::init()'s communicator still carries the metrics, the epochs'
// evaluation and the staleness figures, summed over the workers. docs/training.md, docs/ps.md.
#include <cstdio>
#include <string>

#include "common/check.h"
#include "gyre/ps.h"
#include "train/report.h"
#include "train/trainer_loop.h"

namespace gyre::train {

namespace detail {

void Trainer::attachParameterServer() {
  GYRE_USAGE_CHECK(group_.comm() != nullptr, "--mode ", o_.mode, " needs gyre's world (gyre run --servers S)");
  ps::OptimizerOptions sgd;
  sgd.kind = ps::OptimizerOptions::Kind::kSgd;
  sgd.momentum = static_cast<float>(o_.momentum);
  const std::vector<::torch::Tensor> params = model_->parameters();
  const ps::TableSpec spec = gyre::torch::PSOptimizer::tableFor(params, ps::Mode::parse(o_.mode.substr(3)), sgd);
  // Worker 0's model (the seed's, as on every rank) initialises the servers; everyone pulls it.
  ps_ = std::make_unique<gyre::torch::PSOptimizer>(params, ps::Worker::fromEnvironment(spec), lr_);
  stalenessTotal_.assign(ps::WorkerStats::kMaxStaleness + 1, 0);
}

void Trainer::beginParameterServerEpoch() {
  if (ps_) psEpochStart_ = ps_->worker().stats();
}

void Trainer::recordParameterServerEpoch(EpochRecord& r) {
  if (!ps_) return;
  // Collective: every worker reaches the end of every epoch.
  const ps::WorkerStats now = ps_->worker().stats();
  std::vector<double> mine;
  for (std::size_t k = 0; k < now.staleness.size(); ++k)
    mine.push_back(static_cast<double>(now.staleness[k] - psEpochStart_.staleness[k]));
  mine.push_back(now.clockWaitSeconds - psEpochStart_.clockWaitSeconds);
  const std::vector<double> sum = group_.sum(mine);
  std::vector<std::uint64_t> histogram;
  for (std::size_t k = 0; k + 1 < sum.size(); ++k) {
    histogram.push_back(static_cast<std::uint64_t>(sum[k]));
    stalenessTotal_[k] += histogram.back();
  }
  r.servers = ps_->worker().numServers();
  r.staleness = trimTrailingZeros(histogram);
  r.clockWaitS = sum.back() / world_;
}

void Trainer::announceStaleness() {
  std::printf("%s\n", formatStaleness(stalenessTotal_).c_str());
  std::fflush(stdout);
}

}  // namespace detail
}  // namespace gyre::train
