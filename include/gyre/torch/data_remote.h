// A transform stage run elsewhere, on gyre::rt tasks or actors in other processes or on other
// hosts (Ray Data's map_batches with an actor pool), with back-pressure. Header-only: a program
// that uses it links gyre::rt as well as gyre::torch (docs/data.md, "Remote stages").
//
//   // Registered where it runs (GYRE_RT_ACTOR / GYRE_RT_METHOD, or GYRE_RT_FUNCTION for a task):
//   struct Augmenter {
//     std::vector<torch::Tensor> apply(torch::Tensor images, torch::Tensor labels, std::uint64_t seed);
//   };
//   GYRE_RT_ACTOR(Augmenter);
//   GYRE_RT_METHOD(Augmenter, apply);
//   std::vector<gyre::data::RemoteCall> pool;
//   for (int r = 1; r < rt.size(); ++r) {
//     auto actor = rt.actorWith<Augmenter>({.rank = r});
//     pool.push_back([actor](torch::Tensor i, torch::Tensor l, std::uint64_t seed) {
//       return actor.call(&Augmenter::apply, i, l, seed);
//     });
//   }
//   options.transforms = {gyre::data::remoteStage(pool, {.inFlightPerWorker = 2})};
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rt.h"
#include "gyre/rt/tensor.h"
#include "gyre/torch/data.h"

namespace gyre::data {

// One worker of a remote stage: starts the work on a batch's images and labels with `seed` (draw
// any randomness from it, so the batch comes out the same wherever it runs) and returns the
// future of the new [images, labels] (or [images], the labels kept).
using RemoteCall = std::function<gyre::rt::Future<std::vector<::torch::Tensor>>(
    ::torch::Tensor images, ::torch::Tensor labels, std::uint64_t seed)>;

struct RemoteStageOptions {
  // Batches each worker holds at once. When every worker holds this many, a loader thread that
  // brings another batch waits (back-pressure), so the remote side never queues more than
  // workers x inFlightPerWorker batches, however many threads the loader has.
  int inFlightPerWorker = 1;
};

// A Transform that sends each batch to the least-loaded of `workers` and waits for its answer. The
// seed is drawn from the batch's own generator (applyTransforms), so a Loader gives the same
// batches with a remote stage as with the same function run in place, on any number of threads.
// An error raised remotely (gyre::rt::RemoteError, ActorDiedError, ...) is that batch's error:
// the Loader throws it from the next() that would have returned it. Throws InvalidArgument for no
// workers or inFlightPerWorker < 1.
inline Transform remoteStage(std::vector<RemoteCall> workers, RemoteStageOptions options = {}) {
  if (workers.empty()) throw InvalidArgument("remoteStage: no workers");
  if (options.inFlightPerWorker < 1)
    throw InvalidArgument("remoteStage: inFlightPerWorker must be at least 1, not " +
                          std::to_string(options.inFlightPerWorker));
  struct Pool {
    std::vector<RemoteCall> workers;
    int limit = 1;
    std::mutex mu;
    std::condition_variable room;
    std::vector<int> inFlight;
  };
  auto pool = std::make_shared<Pool>();
  pool->workers = std::move(workers);
  pool->limit = options.inFlightPerWorker;
  pool->inFlight.assign(pool->workers.size(), 0);
  return [pool](Batch& batch, at::Generator& random) {
    const auto seed = static_cast<std::uint64_t>(
        ::torch::randint(std::numeric_limits<std::int64_t>::max(), {1}, random, ::torch::kInt64).item<std::int64_t>());
    std::size_t w = 0;
    {
      std::unique_lock<std::mutex> lock(pool->mu);
      const auto leastLoaded = [&] {
        std::size_t best = 0;
        for (std::size_t i = 1; i < pool->inFlight.size(); ++i)
          if (pool->inFlight[i] < pool->inFlight[best]) best = i;
        return best;
      };
      pool->room.wait(lock, [&] { return pool->inFlight[leastLoaded()] < pool->limit; });
      w = leastLoaded();
      ++pool->inFlight[w];
    }
    struct Release {  // however the call ends
      Pool& p;
      std::size_t w;
      ~Release() {
        {
          std::lock_guard<std::mutex> lock(p.mu);
          --p.inFlight[w];
        }
        p.room.notify_one();
      }
    } release{*pool, w};
    std::vector<::torch::Tensor> out = pool->workers[w](batch.images, batch.labels, seed).get();
    if (out.empty() || out.size() > 2)
      throw Error("remoteStage: worker " + std::to_string(w) + " answered " + std::to_string(out.size()) +
                  " tensors for batch " + std::to_string(batch.index) + "; expected [images] or [images, labels]");
    const ::torch::Tensor& labels = out.size() == 2 ? out[1] : batch.labels;
    if (out[0].dim() == 0 || labels.dim() == 0 || labels.size(0) != out[0].size(0))
      throw Error("remoteStage: worker " + std::to_string(w) + " answered " +
                  (out[0].dim() == 0 ? std::string("a scalar") : std::to_string(out[0].size(0)) + " images") + " and " +
                  (labels.dim() == 0 ? std::string("a scalar") : std::to_string(labels.size(0)) + " labels") +
                  " for batch " + std::to_string(batch.index));
    batch.images = out[0];
    if (out.size() == 2) batch.labels = out[1];
  };
}

}  // namespace gyre::data
