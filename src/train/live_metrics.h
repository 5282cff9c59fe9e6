// --metrics-port: rank 0 of a training job serves its figures to Prometheus while it trains
// (GET /metrics, text format; src/metrics/). Updated by the training thread after each step and
// epoch, read by the server's thread at each scrape. Families:
//   gyre_train_steps_total, gyre_train_samples_total              counters
//   gyre_train_samples_per_second                                  gauge, over the last 50 steps
//   gyre_train_step_seconds_total{part=data|compute|communication_exposed}
//                                                                  counters: where steps' time went
//   gyre_train_communication_seconds_total{hidden=true|false}      counters: allreduce time, hidden or not
//   gyre_train_rank_step_seconds{rank}                             gauge: each rank's last step time
//   gyre_train_epoch, gyre_train_loss, gyre_train_test_accuracy    gauges, at each epoch's end
//   gyre_train_workers, gyre_train_restarts                        gauges: the world, the generation
//   gyre_checkpoints_total, gyre_checkpoint_stall_seconds_total    counters
//   gyre_ps_staleness                                              histogram (parameter-server modes)
//   gyre_collective_{calls,bytes,seconds}_total{op,algorithm}      counters of this process's collectives
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gyre/torch/step_timing.h"
#include "train/trainer.h"

namespace gyre::metrics {
class Server;
}

namespace gyre::train {

class LiveMetrics {
 public:
  // Starts serving on 0.0.0.0:`port`; throws gyre::Error naming --metrics-port when it cannot.
  LiveMetrics(int port, int world, int restartCount, std::int64_t batch);
  ~LiveMetrics();
  LiveMetrics(const LiveMetrics&) = delete;
  LiveMetrics& operator=(const LiveMetrics&) = delete;

  // After each step: its timing (zeros for a plain loop), the part spent waiting for data, and
  // each rank's step time in milliseconds, as progress.jsonl has them (empty when the ranks do
  // not share them).
  void step(const gyre::torch::StepTiming& timing, double dataWaitS, const std::vector<double>& rankMs);
  void epoch(const EpochRecord& report);

  // The exposition text (what a scrape gets).
  std::string render() const;
  int port() const;

 private:
  mutable std::mutex mutex_;
  int world_;
  int restartCount_;
  std::int64_t batch_;
  std::int64_t steps_ = 0;
  double dataS_ = 0, computeS_ = 0, waitS_ = 0, communicateS_ = 0;
  std::deque<std::chrono::steady_clock::time_point> recent_;  // the last steps' ends
  std::vector<double> rankMs_;
  int epoch_ = 0;
  double loss_ = 0;
  double accuracy_ = -1;  // < 0: none yet
  std::int64_t checkpoints_ = 0;
  double checkpointStallS_ = 0;
  std::vector<double> staleness_;
  std::unique_ptr<metrics::Server> server_;  // last: it calls render() until destroyed
};

}  // namespace gyre::train
