// How the built-in trainer lays its N workers out when it splits the model (--pp): D = N / P
// data-parallel replicas of a pipeline of P ranks. Rank r holds pipeline rank r % P of replica
// r / P, so a pipeline's ranks are neighbours (gyre run fills each host in rank order: the
// activations cross the fastest links) and the replicas' same ranks form the data-parallel groups
// that average gradients.
//
// libtorch-free: the gyre tool checks a layout before it starts any worker.
#pragma once

#include <string_view>
#include <vector>

#include "train/options.h"

namespace gyre::train {

struct Layout {
  int dp = 1;  // data-parallel replicas
  int pp = 1;  // pipeline ranks in each replica
  int rank = 0;

  int stageRank() const { return rank % pp; }  // within the pipeline
  int replica() const { return rank / pp; }    // within the data-parallel group
};

// The layout of `world` workers, `rank` among them. Throws InvalidArgument (checkWorld's) when
// it does not fit.
Layout layoutOf(const TrainOptions& o, int world, int rank);

// --micro-batches, or its default 2 · P.
int microBatchesOf(const TrainOptions& o);

// The layers of the model `o` names, as a Sequential: what a pipeline cuts into stages.
int modelLayers(const TrainOptions& o);

// --balance given as layer counts ("3,2,1"): one per stage of the pipeline (P · v), each at least
// 1, summing to the model's layers. Empty for "even" and "time". Throws InvalidArgument.
std::vector<int> explicitBalance(const TrainOptions& o);

// The checks of the model-parallel flags that need no world (validateOptions calls it): what the
// pipeline cannot be combined with yet, a schedule it cannot run, a balance that does not fit.
void checkModelParallel(const TrainOptions& o);
// The ones that need it (checkWorld calls it): P divides the world, --dp agrees, each replica's
// batch divides into the micro-batches.
void checkLayout(const TrainOptions& o, int world);

}  // namespace gyre::train
