// That every rank holds the same parameters (count, then each one's shape and dtype, in order)
// before anything is laid out from them: with different models on different ranks, the bucket
// plans, offsets and element counts of the collectives disagree, and what follows is a hang, a
// garbage index or silently wrong training. As PyTorch DDP's _verify_param_shape_across_processes,
// checked always (not only in debug mode): it costs one small collective, once.
#pragma once

#include <torch/torch.h>

#include <string>
#include <string_view>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::torch {

// Collective. Every rank passes its tensors in its order, and their names (compared too) or none
// (then only the index names a tensor). One allgather of a fixed-size digest of each rank's list
// (count and a hash of every shape, dtype and name); when they differ, the lists themselves are
// gathered so that every rank throws the same kind of error, InvalidArgument, naming the first
// tensor that differs (index, name, its shape and dtype on this rank and on the other rank) and
// the ranks that differ from the others. `what` starts the message ("DistributedOptimizer").
// Nothing is exchanged with one rank.
void checkSameParameters(Communicator& comm, const std::vector<::torch::Tensor>& tensors,
                         const std::vector<std::string>& names, std::string_view what,
                         Timeout timeout = Timeout{0});

}  // namespace gyre::torch
