// How `gyre bench train` runs its configurations: the programs found and checked before anything
// runs (gyre_train_worker; for --baseline ddp the DDP script beside gyre and a python3 that imports
// torch with gloo), then each run as a process group of its own whose JSON epoch lines become its
// figures. The plan (bench_train_plan.h) says what each run's command line is.
#pragma once

#include "bench_train_plan.h"

namespace gyre::app {

// The programs of the runs. With `ddp`, also the DDP script (InvalidArgument when the build did
// not put it beside gyre) and python3: --python, else python3 on PATH, else /usr/bin/python3. When
// none imports torch with gloo, ddpSkipped says why (and python stays empty), or for a --python
// that does not, InvalidArgument. Throws InvalidArgument for a --worker that is not an executable
// file, or no gyre_train_worker beside gyre.
TrainPrograms findTrainPrograms(const TrainBenchFlags& f, bool ddp);

// Runs `c` once, with its threads set (threadEnvironment) and bounded by --timeout, and returns
// its epochs together (combineEpochs). Throws RunFailed when it fails, times out or prints no
// figures; stopping it stops gyre run's workers or DDP's processes too.
RunFigures runTrainConfig(const TrainConfig& c, const TrainBenchFlags& f, const TrainPrograms& p);

}  // namespace gyre::app
