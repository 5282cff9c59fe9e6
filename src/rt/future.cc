#include "gyre/rt/future.h"

#include <algorithm>

#include "common/config.h"
#include "common/cpu_relax.h"
#include "common/mutex.h"
#include "gyre/init.h"
#include "rt/links.h"

namespace gyre::rt::detail {
namespace {

enum Kind : int { kRemote = 0, kInvalid, kProtocol, kTimeout, kPeerLost, kActorDied, kOther };

}  // namespace

ErrorRecord recordOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const RemoteError& r) {
    return {kRemote, r.function(), r.type(), r.message(), -1};
  } catch (const InvalidArgument& x) {
    return {kInvalid, "", "", x.what(), -1};
  } catch (const ProtocolError& x) {
    return {kProtocol, "", "", x.what(), -1};
  } catch (const TimeoutError& x) {
    return {kTimeout, "", "", x.what(), -1};
  } catch (const PeerLostError& x) {
    return {kPeerLost, "", "", x.what(), x.rank()};
  } catch (const ActorDiedError& x) {
    return {kActorDied, "", "", x.what(), -1};
  } catch (const std::exception& x) {
    return {kOther, "", "", x.what(), -1};
  } catch (...) {
    return {kOther, "", "", "an exception not derived from std::exception", -1};
  }
}

std::exception_ptr exceptionOf(const ErrorRecord& r) {
  switch (r.kind) {
    case kRemote:
      return std::make_exception_ptr(RemoteError(r.function, r.type, r.message));
    case kInvalid:
      return std::make_exception_ptr(InvalidArgument(r.message));
    case kProtocol:
      return std::make_exception_ptr(ProtocolError(r.message));
    case kTimeout:
      return std::make_exception_ptr(TimeoutError(r.message));
    case kPeerLost:
      return std::make_exception_ptr(PeerLostError(r.message, r.rank));
    case kActorDied:
      return std::make_exception_ptr(ActorDiedError(r.message));
    default:
      return std::make_exception_ptr(Error(r.message));
  }
}

void Promise::setValue(Bytes value) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ready_) return;
  value_ = std::move(value);
  finish(lock);
}

void Promise::setError(std::exception_ptr error) {
  ErrorRecord record = recordOf(std::move(error));
  std::unique_lock<std::mutex> lock(mu_);
  if (ready_) return;
  error_ = std::move(record);
  finish(lock);
}

void Promise::finish(std::unique_lock<std::mutex>& lock) {
  ready_ = true;
  set_.store(true, std::memory_order_release);
  std::vector<std::pair<std::uint64_t, std::function<void()>>> callbacks = std::move(callbacks_);
  callbacks_.clear();
  lock.unlock();
  cv_.notify_all();
  for (auto& [id, f] : callbacks) f();
}

bool Promise::waitUntil(std::optional<std::chrono::steady_clock::time_point> deadline) const {
  flushThisThread();  // the calls this thread queued go out before it waits for their answers
  // A short spin first (GYRE_SPIN_US, 50 µs by default): an answer over loopback often comes
  // within it, and a waiter that blocked would cost a wake-up on each side (sync tasks over TCP:
  // ~18k/s without, ~25-30k/s with it on 2 cores).
  static const auto spin = std::chrono::microseconds(
      config::getOptionalInt(config::processEnvironment(), "GYRE_SPIN_US").value_or(50));
  if (spin.count() > 0 && !set_.load(std::memory_order_acquire)) {
    auto until = std::chrono::steady_clock::now() + spin;
    if (deadline && *deadline < until) until = *deadline;
    while (!set_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) cpuRelax();
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!deadline) {
    cv_.wait(lock, [this] { return ready_; });
    return true;
  }
  return cv_.wait_until(lock, *deadline, [this] { return ready_; });
}

bool Promise::poll() const {
  flushThisThread();  // a caller polling ready() waits too
  return ready();
}

bool Promise::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

const Bytes& Promise::value() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_) throw Error("gyre::rt: a future's value was read before it was ready");
  if (error_) std::rethrow_exception(exceptionOf(*error_));
  return value_;
}

std::uint64_t Promise::onReady(std::function<void()> f) {
  flushThisThread();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) {
      const std::uint64_t id = nextCallback_++;
      callbacks_.emplace_back(id, std::move(f));
      return id;
    }
  }
  f();
  return 0;
}

void Promise::forget(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(callbacks_, [id](const auto& c) { return c.first == id; });
}

std::vector<std::size_t> waitSome(const std::vector<std::shared_ptr<Promise>>& promises, std::size_t k,
                                  std::chrono::milliseconds timeout) {
  // One counter that every promise's callback bumps: the waiter sleeps on it alone.
  struct Shared {
    Mutex mu;
    CondVar cv;
    std::size_t ready GYRE_GUARDED_BY(mu) = 0;
  };
  auto shared = std::make_shared<Shared>();
  std::vector<std::uint64_t> ids;
  ids.reserve(promises.size());
  for (const auto& p : promises)
    ids.push_back(p->onReady([shared] {
      {
        MutexLock lock(shared->mu);
        ++shared->ready;
      }
      shared->cv.notifyAll();
    }));
  k = std::min(k, promises.size());
  {
    MutexLock lock(shared->mu);
    shared->cv.waitFor(shared->mu, timeout, [&]() GYRE_REQUIRES(shared->mu) { return shared->ready >= k; });
  }
  // A caller that polls with short time-outs leaves nothing behind on the futures not ready.
  for (std::size_t i = 0; i < promises.size(); ++i)
    if (ids[i] != 0) promises[i]->forget(ids[i]);
  std::vector<std::size_t> done;
  for (std::size_t i = 0; i < promises.size(); ++i)
    if (promises[i]->ready()) done.push_back(i);
  return done;
}

void throwGetTimeout(std::chrono::milliseconds timeout) {
  throw GetTimeoutError("gyre::rt: no result within " + std::to_string(timeout.count()) +
                        " ms (the call goes on; get() again to wait longer)");
}

}  // namespace gyre::rt::detail
