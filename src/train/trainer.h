// The built-in trainer behind `gyre train`: Fashion-MNIST on the mlp or the cnn, data-parallel
// over the ranks of gyre::init()'s world (or, with `plain`, a single process with no gyre at all,
// the reference loop the benchmarks compare with). gyre_train_worker is a command line over
// runTraining(); the options and their flags are declared in options.h; docs/training.md
// describes the flags and the output.
//
// This header is libtorch-free, so the worker's main compiles quickly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "train/options.h"  // TrainOptions, validateOptions
#include "train/records.h"

namespace gyre::train {

// Trains as `options` say and returns every epoch's report (a resumed run: the epochs it ran; an
// epoch cut short by stopAtStep has none). Rank 0 prints the progress bar (stderr), one line per
// epoch and one per checkpoint (stdout), and writes the run directory: config.json at the start,
// metrics.jsonl and steps.jsonl (each step's loss and rate) after every epoch (steps.jsonl also
// before each checkpoint), model.pt at the end, each through a temporary file and a rename; and
// progress.jsonl, appended as each step ends (step_log.h). `comm` null: plain mode (options.plain
// must be set).
// Throws InvalidArgument for options that do not fit this world, gyre::Error for missing data and unwritable
// files, and the communicator's errors.
std::vector<EpochRecord> runTraining(const TrainOptions& options, std::shared_ptr<Communicator> comm);
// The same with gyre::init()'s world, or with none when options.plain.
std::vector<EpochRecord> runTraining(const TrainOptions& options);

}  // namespace gyre::train
