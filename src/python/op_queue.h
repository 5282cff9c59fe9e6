// The operations of one process group of torch.distributed's backend "gyre" (process_group.h):
// queued in issue order and run one at a time on its Communicator, by whoever gets to them first.
//
// A caller that waits runs the queued operations up to its own on its thread (a blocking
// dist.all_reduce costs no hand-off to another thread: on a 2-core machine the hand-off doubled
// a 4 KiB all_reduce's time). The queue's own thread runs at once the operations whose future is
// asked for (DDP's buckets) or that are polled, and any other left unclaimed for a millisecond,
// so work that nobody waits for still completes. Point-to-point operations next to each other in
// the queue run together as one exchange, so two ranks that isend to each other and then recv
// cannot block each other.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gyre/communicator.h"
#include "python/c10d_ops.h"

namespace gyre::python {

class OpQueue;

// A send or receive: alone, or one of several run as one exchange.
struct P2PPart {
  bool send = false;
  int peer = -1;
  int tag = 0;
  ops::Staged buffer;
};

// Runs `parts` (all with the first one's tag) as one exchange.
void runP2P(Communicator& comm, const std::vector<P2PPart*>& parts);

class GyreWork final : public c10d::Work {
 public:
  GyreWork(OpQueue* queue, int rank, c10d::OpType type, std::vector<at::Tensor> outputs, ops::Run run,
           std::optional<P2PPart> p2p = std::nullopt);

  // Runs the operations queued up to this one on the caller's thread, then waits for it.
  bool wait(std::chrono::milliseconds timeout) override;
  // Whoever polls or holds the future does not run it: the queue's thread must, now.
  bool isCompleted() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }

  // batch_isend_irecv: this work completes when `leader` (the batch's exchange) does.
  void follow(c10::intrusive_ptr<GyreWork> leader);
  void addFollower(c10::intrusive_ptr<GyreWork> follower) { followers_.push_back(std::move(follower)); }

 private:
  friend class OpQueue;

  // The operation's error, or null; completes nothing.
  std::exception_ptr run(Communicator& comm);
  // The work and its followers, then their futures (whose callbacks run here).
  void complete(std::exception_ptr error);
  GyreWork* next() { return leader_ ? leader_.get() : this; }

  OpQueue* queue_;  // outlives every unfinished work: its destructor runs what is queued
  std::vector<at::Tensor> outputs_;
  ops::Run run_;
  std::optional<P2PPart> p2p_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::intrusive_ptr<GyreWork> leader_;
  std::vector<c10::intrusive_ptr<GyreWork>> followers_;
  const std::chrono::steady_clock::time_point issuedAt_ = std::chrono::steady_clock::now();
  bool urgent_ = false;  // guarded by the queue's mutex
};

class OpQueue {
 public:
  explicit OpQueue(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  // Runs what is queued (each operation is bounded by its time-out), then stops the thread.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // `urgent`: the queue's thread runs it as soon as it is next.
  void push(c10::intrusive_ptr<GyreWork> work, bool urgent);
  void runUpTo(GyreWork* work);
  void hurry(GyreWork* work);

 private:
  void threadLoop();
  // Runs the front operation (with the p2p ones right behind a p2p one); `lock` held on entry
  // and exit, released while it runs.
  void runFront(std::unique_lock<std::mutex>& lock);
  void drain();

  std::shared_ptr<Communicator> comm_;
  std::mutex mu_;
  std::condition_variable cv_;    // the queue's thread waits here
  std::condition_variable idle_;  // callers (and the destructor) wait here for running_ to clear
  std::deque<c10::intrusive_ptr<GyreWork>> queue_;
  bool running_ = false;
  bool stop_ = false;
  bool threadAsleep_ = false;  // untimed: a push must wake it
  int waiting_ = 0;            // callers waiting on idle_
  std::thread thread_;
};

}  // namespace gyre::python
