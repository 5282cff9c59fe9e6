#include "train/live_metrics.h"

#include <string>

#include "collectives/tally.h"
#include "gyre/ps.h"
#include "metrics/exposition.h"
#include "metrics/server.h"

namespace gyre::train {

namespace {
constexpr std::size_t kWindow = 50;  // steps in the samples/s gauge
}

LiveMetrics::LiveMetrics(int port, int world, int restartCount, std::int64_t batch)
    : world_(world), restartCount_(restartCount), batch_(batch) {
  server_ = std::make_unique<metrics::Server>(
      "0.0.0.0", port, [this] { return render(); }, "--metrics-port");
}

LiveMetrics::~LiveMetrics() {
  server_.reset();
}

int LiveMetrics::port() const {
  return server_->port();
}

void LiveMetrics::step(const gyre::torch::StepTiming& t, double dataWaitS,
                       const std::vector<double>& rankMs) {
  std::lock_guard lock(mutex_);
  ++steps_;
  dataS_ += dataWaitS;
  computeS_ += std::max(0.0, t.compute - dataWaitS);
  waitS_ += t.wait;
  communicateS_ += t.communicate;
  rankMs_ = rankMs;
  recent_.push_back(std::chrono::steady_clock::now());
  if (recent_.size() > kWindow + 1) recent_.pop_front();
}

void LiveMetrics::epoch(const EpochRecord& r) {
  std::lock_guard lock(mutex_);
  epoch_ = r.epoch;
  loss_ = r.loss;
  if (r.testAccuracy) accuracy_ = *r.testAccuracy;
  for (const CheckpointSave& c : r.checkpoints) {
    ++checkpoints_;
    checkpointStallS_ += c.stallS;
  }
  if (r.staleness) {
    // The epoch's histogram comes without its trailing zeros: every bucket, always, so the last
    // one is the "that and above" bucket and the buckets do not change between scrapes.
    staleness_.resize(std::max<std::size_t>(ps::WorkerStats::kMaxStaleness + 1, r.staleness->size()), 0);
    for (std::size_t k = 0; k < r.staleness->size(); ++k)
      staleness_[k] += static_cast<double>((*r.staleness)[k]);
  }
}

std::string LiveMetrics::render() const {
  using metrics::Family;
  std::vector<Family> f;
  {
    std::lock_guard lock(mutex_);
    f.push_back(Family{
        "gyre_train_steps_total",
        "Training steps done by this job since it started",
        "counter",
        {}}.add(static_cast<double>(steps_)));
    f.push_back(Family{
        "gyre_train_samples_total",
        "Training samples of those steps, over all workers",
        "counter",
        {}}.add(static_cast<double>(steps_ * batch_)));
    double rate = 0;
    if (recent_.size() > 1)
      rate = static_cast<double>((recent_.size() - 1) * static_cast<std::size_t>(batch_)) /
             std::chrono::duration<double>(recent_.back() - recent_.front()).count();
    f.push_back(Family{
        "gyre_train_samples_per_second",
        "Training samples per second over the last 50 steps",
        "gauge",
        {}}.add(rate));
    Family split{
        "gyre_train_step_seconds_total",
        "Where rank 0's steps' time went: waiting for data, compute (forward, backward, update), and the "
        "communication compute did not hide",
        "counter",
        {}};
    split.add(dataS_, {{"part", "data"}})
        .add(computeS_, {{"part", "compute"}})
        .add(waitS_, {{"part", "communication_exposed"}});
    f.push_back(std::move(split));
    Family comm{"gyre_train_communication_seconds_total",
                "Time rank 0's gradient allreduces ran, hidden behind compute or not",
                "counter",
                {}};
    comm.add(std::max(0.0, communicateS_ - waitS_), {{"hidden", "true"}}).add(waitS_, {{"hidden", "false"}});
    f.push_back(std::move(comm));
    if (!rankMs_.empty()) {
      Family ranks{"gyre_train_rank_step_seconds",
                   "Each rank's last step: from the end of its previous step to its gradients being ready",
                   "gauge",
                   {}};
      for (std::size_t r = 0; r < rankMs_.size(); ++r)
        ranks.add(rankMs_[r] / 1e3, {{"rank", std::to_string(r)}});
      f.push_back(std::move(ranks));
    }
    f.push_back(
        Family{"gyre_train_epoch", "The last epoch finished (from 1; 0: none yet)", "gauge", {}}.add(epoch_));
    if (epoch_ > 0)
      f.push_back(Family{"gyre_train_loss", "The last epoch's mean training loss", "gauge", {}}.add(loss_));
    if (accuracy_ >= 0)
      f.push_back(
          Family{"gyre_train_test_accuracy", "The last epoch's test accuracy (0..1)", "gauge", {}}.add(
              accuracy_));
    f.push_back(Family{"gyre_train_workers", "Workers in the job", "gauge", {}}.add(world_));
    f.push_back(Family{
        "gyre_train_restarts",
        "Restarts of the job before this generation (GYRE_RESTART_COUNT)",
        "gauge",
        {}}.add(restartCount_));
    f.push_back(Family{"gyre_checkpoints_total", "Checkpoints saved", "counter", {}}.add(
        static_cast<double>(checkpoints_)));
    f.push_back(Family{
        "gyre_checkpoint_stall_seconds_total",
        "Time training waited for checkpoints",
        "counter",
        {}}.add(checkpointStallS_));
    if (!staleness_.empty())
      f.push_back(Family{
          "gyre_ps_staleness",
          "Parameter-server updates by staleness (other workers' updates between a pull and its push), "
          "summed over the workers",
          "histogram",
          {}}.integerHistogram(staleness_));
  }
  Family calls{"gyre_collective_calls_total",
               "Collectives this process ran, by operation and algorithm",
               "counter",
               {}};
  Family bytes{"gyre_collective_bytes_total", "Bytes this process put into those collectives", "counter", {}};
  Family seconds{"gyre_collective_seconds_total", "Seconds those collectives took", "counter", {}};
  for (const collectives::Tally& t : collectives::tallies()) {
    const metrics::Labels labels = {{"op", t.op}, {"algorithm", t.algorithm}};
    calls.add(static_cast<double>(t.calls), labels);
    bytes.add(static_cast<double>(t.bytes), labels);
    seconds.add(t.seconds, labels);
  }
  f.push_back(std::move(calls));
  f.push_back(std::move(bytes));
  f.push_back(std::move(seconds));
  return metrics::render(f);
}

}  // namespace gyre::train
