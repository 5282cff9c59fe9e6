// Everything for training on libtorch, data-parallel or through the parameter server (link gyre_torch).
#pragma once

#include "gyre/gyre.h"
#include "gyre/torch/broadcast.h"
#include "gyre/torch/checkpoint.h"
#include "gyre/torch/data.h"
#include "gyre/torch/distributed_optimizer.h"
#include "gyre/torch/elastic.h"
#include "gyre/torch/lr.h"
#include "gyre/torch/metrics.h"
#include "gyre/torch/optimizers.h"
#include "gyre/torch/pipeline.h"
#include "gyre/torch/ps_optimizer.h"
#include "gyre/torch/sampler.h"
#include "gyre/torch/step_timing.h"
#include "gyre/torch/sync_batch_norm.h"
#include "gyre/torch/tensor_parallel.h"
#include "gyre/torch/timeline.h"
