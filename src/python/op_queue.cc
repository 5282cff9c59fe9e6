#include "python/op_queue.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "common/logging.h"
#include "gyre/errors.h"

namespace gyre::python {
namespace {

// How long an operation waits for its caller to run it, and the queue's thread sleeps between
// looks while operations come (kIdleBeforeSleep after the last, it sleeps until woken).
constexpr auto kTick = std::chrono::milliseconds(1);
constexpr auto kIdleBeforeSleep = std::chrono::milliseconds(100);

// Runs `fn`, returning what it threw. Ranks that disagree (gyre's InvalidArgument, a ValueError)
// are RuntimeError in torch.distributed, as with its own backends.
template <typename Fn>
std::exception_ptr capture(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return std::make_exception_ptr(std::runtime_error(e.what()));
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

void runP2P(Communicator& comm, const std::vector<P2PPart*>& parts) {
  std::vector<P2PMessage> sends, recvs;
  for (P2PPart* p : parts) {
    p->buffer.begin();
    (p->send ? sends : recvs).push_back(P2PMessage{p->peer, p->buffer.data(), p->buffer.bytes()});
  }
  P2POptions o;
  o.dtype = DataType::kUInt8;
  o.tag = parts.front()->tag;
  comm.exchange(sends, recvs, o);
  for (P2PPart* p : parts)
    if (!p->send) p->buffer.finish();
}

GyreWork::GyreWork(OpQueue* queue, int rank, c10d::OpType type, std::vector<at::Tensor> outputs, ops::Run run,
                   std::optional<P2PPart> p2p)
    : Work(rank, type),
      queue_(queue),
      outputs_(std::move(outputs)),
      run_(std::move(run)),
      p2p_(std::move(p2p)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool GyreWork::wait(std::chrono::milliseconds timeout) {
  if (!Work::isCompleted()) queue_->runUpTo(next());
  return Work::wait(timeout);
}

bool GyreWork::isCompleted() {
  const bool done = Work::isCompleted();
  if (!done) queue_->hurry(next());
  return done;
}

c10::intrusive_ptr<c10::ivalue::Future> GyreWork::getFuture() {
  if (!Work::isCompleted()) queue_->hurry(next());
  return future_;
}

void GyreWork::follow(c10::intrusive_ptr<GyreWork> leader) {
  leader_ = std::move(leader);
}

std::exception_ptr GyreWork::run(Communicator& comm) {
  std::exception_ptr error = capture([&] {
    if (p2p_) {
      runP2P(comm, {&*p2p_});
    } else {
      run_(comm);
    }
  });
  run_ = nullptr;  // what it captured (staging tensors) goes now
  p2p_.reset();
  return error;
}

void GyreWork::complete(std::exception_ptr error) {
  for (auto& f : followers_) f->complete(error);
  followers_.clear();
  finish(error);
  // A callback that throws (then()'s are caught by the future itself) must not stop the queue.
  const std::exception_ptr failed = capture([&] {
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
  });
  if (failed) {
    try {
      std::rethrow_exception(failed);
    } catch (const std::exception& e) {
      log::warn("torch.distributed backend gyre: a callback of a completed operation threw: ", e.what());
    }
  }
}

OpQueue::~OpQueue() {
  // Python callbacks of what is still queued need the GIL, which whoever drops the last
  // reference to the process group may hold.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    drain();
  } else {
    drain();
  }
}

void OpQueue::drain() {
  std::unique_lock lock(mu_);
  stop_ = true;
  cv_.notify_all();
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  lock.lock();
  while (!queue_.empty() && !running_) runFront(lock);  // nothing else runs them now
  idle_.wait(lock, [&] { return !running_; });
}

void OpQueue::push(c10::intrusive_ptr<GyreWork> work, bool urgent) {
  std::lock_guard lock(mu_);
  work->urgent_ = urgent;
  queue_.push_back(std::move(work));
  if (!thread_.joinable())
    thread_ = std::thread([this] { threadLoop(); });
  else if (urgent || threadAsleep_)
    cv_.notify_one();
}

void OpQueue::hurry(GyreWork* work) {
  std::lock_guard lock(mu_);
  for (auto& queued : queue_)
    if (queued.get() == work && !queued->urgent_) {
      queued->urgent_ = true;
      cv_.notify_one();
    }
}

void OpQueue::runUpTo(GyreWork* work) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (std::none_of(queue_.begin(), queue_.end(), [&](const auto& q) { return q.get() == work; }))
      return;  // running or done: the work's own wait follows
    if (running_) {
      ++waiting_;
      idle_.wait(lock, [&] { return !running_; });
      --waiting_;
      continue;
    }
    runFront(lock);
  }
}

void OpQueue::runFront(std::unique_lock<std::mutex>& lock) {
  std::vector<c10::intrusive_ptr<GyreWork>> batch{std::move(queue_.front())};
  queue_.pop_front();
  if (batch.front()->p2p_)
    while (!queue_.empty() && queue_.front()->p2p_ && queue_.front()->p2p_->tag == batch.front()->p2p_->tag) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  running_ = true;
  lock.unlock();
  std::exception_ptr error;
  if (batch.size() == 1) {
    error = batch.front()->run(*comm_);
  } else {
    std::vector<P2PPart*> parts;
    for (auto& w : batch) parts.push_back(&*w->p2p_);
    error = capture([&] { runP2P(*comm_, parts); });
    for (auto& w : batch) w->p2p_.reset();
  }
  lock.lock();
  running_ = false;
  if (waiting_ > 0 || stop_) idle_.notify_all();
  if (stop_ || (!queue_.empty() && queue_.front()->urgent_)) cv_.notify_one();
  // Completed outside running_: a callback may issue (and wait for) another operation.
  lock.unlock();
  for (auto& w : batch) w->complete(error);
  lock.lock();
}

void OpQueue::threadLoop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  Clock::time_point lastWork = Clock::now();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (queue_.empty()) {
      if (stop_) return;
      if (now - lastWork > kIdleBeforeSleep) {  // idle a while: sleep until an operation comes
        threadAsleep_ = true;
        cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
        threadAsleep_ = false;
      } else {
        cv_.wait_for(lock, kTick);
      }
      continue;
    }
    lastWork = now;
    if (running_) {
      cv_.wait_for(lock, kTick);
      continue;
    }
    const Clock::time_point due = queue_.front()->issuedAt_ + kTick;
    if (!stop_ && !queue_.front()->urgent_ && now < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    runFront(lock);
  }
}

}  // namespace gyre::python
