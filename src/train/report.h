// How an epoch's figures are shown: one line for people, one JSON object for programs
// (metrics.jsonl, --json), and the run's configuration (config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace gyre::train {

// One line per epoch, as
//   epoch 1/3  loss 0.4312  test acc 87.12%  2093 samples/s  speedup 1.86  efficiency 0.93
//   step: data 0.2% compute 96% comm 9% (hidden 7%) wait 2%      (on the same line)
// where data + compute + wait = 100% (compute without the data wait).
// Leaves out what is unknown (test accuracy with --no-eval, speedup and efficiency without a
// reference, the step split in plain mode).
std::string formatEpochLine(const EpochReport& report);

// One JSON object on one line (no newline): epoch, epochs, world, plain, model, batch,
// per_rank_batch, lr, compression, loss, test_accuracy, samples_per_s, seconds, steps,
// timed_steps, speedup, efficiency, compute_s (the data wait included), communicate_s,
// bytes_per_step (gradient bytes a worker put into the collectives per step), stragglers (the
// workers named during the epoch: rank, since_step, factor; null when detection is off),
// dropped_gradients (--backup-workers: the gradients left out in the epoch; null when off),
// autotune (--autotune's choice: bucket_cap_mb, algorithm, step_ms, trials, steps, summary; null
// until it is made and without it), wait_s,
// hidden_s, data_wait_s, torch_threads,
// blas_threads, checkpoints (an array of {step, bytes, stall_s, path}), mode, and in the
// parameter-server modes servers, staleness (updates by staleness, summed over the workers,
// without trailing zeros) and clock_wait_s (seconds blocked in clock(), averaged over the
// workers), peak_rss_bytes and model_state_bytes (EpochReport's; the latter null when
// unknown), pipeline (--pp: pp, dp, micro_batches, schedule, balance, bubble, ideal_bubble,
// stage_times_bubble, stage_ms, peak_activation_bytes); null for what is unknown or does not apply.
std::string toJsonLine(const EpochReport& report);

// One line of steps.jsonl (no newline): {"step": global step from 1, "epoch": from 1, "loss": the
// step's training loss averaged over ranks, "lr": the rate it used}.
std::string stepJsonLine(std::int64_t step, int epoch, double loss, double lr);

// A histogram without its trailing zeros (staleness in metrics.jsonl).
std::vector<std::uint64_t> trimTrailingZeros(std::vector<std::uint64_t> histogram);

// The closing line of a parameter-server run, from its updates by staleness (the last entry
// counts that staleness and above, shown as "64+"):
//   staleness: mean 0.93, p50 1, p99 3, max 4 over 938 updates
std::string formatStaleness(const std::vector<std::uint64_t>& histogram);

// The options and what they resolved to in this world, as pretty-printed JSON.
// `stageLayers`: with --pp, the layers of each stage as the run cut them (stage_layers; a
// checkpoint of a pipeline needs them to resume on another layout).
std::string configJson(const TrainOptions& options, int world, double lr, int torchThreads,
                       const std::vector<int>& stageLayers = {});

}  // namespace gyre::train
