// How the built-in trainer lays its N workers out when it splits the model (--pp, --tp): D = N /
// (P · T) data-parallel replicas of a pipeline of P stages, each stage split over a tensor-parallel
// group of T ranks. The tensor-parallel groups are innermost (they talk most: two allreduces per
// block and pass), then the pipeline, then the replicas: rank r is tensor-parallel rank r % T of
// pipeline stage (r / T) % P of replica r / (P · T). Neighbouring ranks share a group (gyre run
// fills each host in rank order: the busiest traffic crosses the fastest links), and the
// replicas' same ranks form the data-parallel groups that average gradients.
//
// libtorch-free: the gyre tool checks a layout before it starts any worker.
#pragma once

#include <string_view>
#include <vector>

#include "train/options.h"

namespace gyre::train {

struct Layout {
  int dp = 1;  // data-parallel replicas
  int pp = 1;  // pipeline stages in each replica
  int tp = 1;  // tensor-parallel ranks of each stage
  int rank = 0;

  int tpRank() const { return rank % tp; }             // within the tensor-parallel group
  int stageRank() const { return rank / tp % pp; }     // within the pipeline
  int replica() const { return rank / (tp * pp); }     // within the data-parallel group
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
// The ones that need it (checkWorld calls it): P · T divides the world, --dp agrees, each
// replica's batch divides into the micro-batches.
void checkLayout(const TrainOptions& o, int world);

}  // namespace gyre::train
