// Dynamic batching, as Ray Serve's @serve.batch: requests (each a few rows, [n, ...]) wait up to
// `wait` for others to fill a batch of at most maxBatchSize rows; the batch runs in one forward
// pass on a free replica, and each request gets its own rows of the output. One replica at a time
// gathers a batch, the others compute theirs meanwhile, so a batch is as full as the load allows
// and every replica stays busy under load. A request larger than maxBatchSize runs alone.
//
// Thread-safe. The destructor answers every accepted request before it stops the replicas.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "gyre/errors.h"

namespace gyre::serve {

// submit() with maxQueue requests waiting already: the caller answers 503.
class QueueFull : public Error {
 public:
  using Error::Error;
};

struct BatchOptions {
  int maxBatchSize = 32;
  std::chrono::microseconds wait{5000};
  int maxQueue = 1024;
};

struct BatchStats {
  std::uint64_t requests = 0;  // answered
  std::uint64_t rows = 0;
  std::uint64_t batches = 0;
  std::uint64_t failedBatches = 0;  // the forward pass threw
  int queued = 0;                   // requests waiting now
  int busy = 0;                     // replicas computing now
  int running = 0;                  // requests in the batches being computed now
  int replicas = 0;                 // replicas now (those retiring not counted)
  double forwardSeconds = 0;        // in forward passes, all replicas together
};

class Batcher {
 public:
  // One replica's forward pass: [rows, ...] in, [rows, ...] out (its own module: replicas run at
  // once). Called on the replica's thread, under torch::NoGradGuard.
  using Forward = std::function<::torch::Tensor(const ::torch::Tensor&)>;

  Batcher(std::vector<Forward> replicas, BatchOptions options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `rows` ([n, ...], n >= 1, float32) for a forward pass. The future holds its [n, ...]
  // rows of the output, or what the forward pass threw. Requests batch together only with
  // requests of the same row shape. Throws QueueFull.
  std::future<::torch::Tensor> submit(::torch::Tensor rows) GYRE_EXCLUDES(mu_);
  // The same, answered through `done` (on the replica's thread, once): the rows of the output,
  // or a null tensor and what the forward pass threw. `done` must not throw or block for long.
  using Done = std::function<void(::torch::Tensor output, std::exception_ptr error)>;
  void submit(::torch::Tensor rows, Done done) GYRE_EXCLUDES(mu_);

  BatchStats stats() const GYRE_EXCLUDES(mu_);
  int replicas() const GYRE_EXCLUDES(mu_);

  // Autoscaling: one more replica, computing at once; or one fewer, the next replica to look for
  // a batch leaving (after the batch it computes, if any): no accepted request is dropped, the
  // others answer what is queued. Removing the last replica is refused (InvalidArgument).
  void addReplica(Forward forward) GYRE_EXCLUDES(mu_);
  void removeReplica() GYRE_EXCLUDES(mu_);

 private:
  struct Request {
    ::torch::Tensor rows;
    Done done;
    std::chrono::steady_clock::time_point arrival;
  };

  static void answer(Request& r, ::torch::Tensor output, std::exception_ptr error);
  void serve(const Forward& forward) GYRE_EXCLUDES(mu_);
  // Waits for its turn to gather, then takes the next batch off the queue; empty when stopping
  // with nothing queued, or when this replica is to leave.
  std::vector<Request> gather() GYRE_REQUIRES(mu_);
  // Runs one batch and answers its requests.
  void run(const Forward& forward, std::vector<Request>& batch) GYRE_EXCLUDES(mu_);

  const BatchOptions options_;
  mutable Mutex mu_;
  CondVar changed_;
  std::deque<Request> queue_ GYRE_GUARDED_BY(mu_);
  bool gathering_ GYRE_GUARDED_BY(mu_) = false;  // a replica is gathering a batch
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  int retiring_ GYRE_GUARDED_BY(mu_) = 0;  // replicas asked to leave that have not yet
  BatchStats stats_ GYRE_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GYRE_GUARDED_BY(mu_);  // every replica's, those gone too (joined at the end)
};

}  // namespace gyre::serve
