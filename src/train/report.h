// How an epoch's figures are shown: one line for people, one JSON object for programs
// (metrics.jsonl, --json: the records of records.h), and the run's configuration (config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/models.h"
#include "train/trainer.h"

namespace gyre::train {

// One line per epoch, as
//   epoch 1/3  loss 0.4312  test acc 87.12%  2093 samples/s  speedup 1.86  efficiency 0.93
//   step: data 0.2% compute 96% comm 9% (hidden 7%) wait 2%      (on the same line)
// where data + compute + wait = 100% (compute without the data wait).
// Leaves out what is unknown (test accuracy with --no-eval, speedup and efficiency without a
// reference, the step split in plain mode).
std::string formatEpochLine(const EpochRecord& report);

// The epoch's record (records.h) as one JSON object on one line, without a newline: a line of
// metrics.jsonl, and what --json prints.
std::string toJsonLine(const EpochRecord& report);

// One line of steps.jsonl (no newline): the step's record (records.h).
std::string stepJsonLine(std::int64_t step, int epoch, double loss, double lr);

// A histogram without its trailing zeros (staleness in metrics.jsonl).
std::vector<std::uint64_t> trimTrailingZeros(std::vector<std::uint64_t> histogram);

// The closing line of a parameter-server run, from its updates by staleness (the last entry
// counts that staleness and above, shown as "64+"):
//   staleness: mean 0.93, p50 1, p99 3, max 4 over 938 updates
std::string formatStaleness(const std::vector<std::uint64_t>& histogram);

// The options and what they resolved to in this world, as pretty-printed JSON.
// `stageLayers`: with --pp, the layers of each stage as the run cut them (stage_layers; a
// checkpoint of a pipeline needs them to resume on another layout). `shape`: what the model takes
// (input_shape [C, H, W] and classes, which gyre serve rebuilds it with). `data`: how the samples
// were prepared, for whoever sends the model inputs later (a gyre serve client).
struct DataFigures {
  std::vector<double> mean, std;         // the normalisation, per channel (of pixels in [0, 1]) or feature
  std::vector<std::string> classNames;   // --data: label k's name (empty: Fashion-MNIST's 0..9)
};
std::string configJson(const TrainOptions& options, int world, double lr, int torchThreads,
                       const std::vector<int>& stageLayers = {}, const ModelShape& shape = {},
                       const DataFigures& data = {});

}  // namespace gyre::train
