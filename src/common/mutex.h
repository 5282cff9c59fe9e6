// A mutex, its scoped locks and a condition variable that clang's thread-safety analysis
// understands (common/thread_annotations.h). libstdc++'s std::mutex carries no capability
// attribute, so a member GYRE_GUARDED_BY a std::mutex could not be checked.
//
// They are std::mutex and std::condition_variable underneath, with nothing added on the way: a
// lock, an unlock or a wait costs what the std one costs (the engine and the ps hot paths use them).
//
//   Mutex mu_;
//   CondVar changed_;
//   bool ready_ GYRE_GUARDED_BY(mu_) = false;
//
//   void set() GYRE_EXCLUDES(mu_) {
//     { MutexLock lock(mu_); ready_ = true; }
//     changed_.notifyAll();
//   }
//   void waitReady() GYRE_EXCLUDES(mu_) {
//     MutexLock lock(mu_);
//     changed_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return ready_; });
//   }
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "common/thread_annotations.h"

namespace gyre {

// std::mutex as a capability. A Lockable (lock, unlock, try_lock), so std::unique_lock<Mutex>
// works too where a lock is held only sometimes; the analysis does not follow std::unique_lock,
// so that is for a mutex that guards no annotated member (prefer MutexLock and UniqueLock).
class GYRE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() GYRE_ACQUIRE() { mu_.lock(); }
  void unlock() GYRE_RELEASE() { mu_.unlock(); }
  bool try_lock() GYRE_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction, like std::lock_guard.
class GYRE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) GYRE_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() GYRE_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A MutexLock that can be released before its scope ends and taken again, like
// std::unique_lock (locked at construction; the destructor unlocks only if it holds the mutex).
class GYRE_SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) GYRE_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~UniqueLock() GYRE_RELEASE() {
    if (owns_) mu_.unlock();
  }
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() GYRE_ACQUIRE() {
    mu_.lock();
    owns_ = true;
  }
  void unlock() GYRE_RELEASE() {
    owns_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool owns_ = true;
};

// std::condition_variable for a Mutex the caller holds (through a MutexLock or UniqueLock):
// each wait releases it while blocked and holds it again when it returns, as std's does.
//
// The predicate forms evaluate `done` with the mutex held. A lambda that reads guarded members
// must say that it runs under the lock, or the analysis (which checks a lambda's body on its
// own) reports those reads: [&]() GYRE_REQUIRES(mu_) { return done_; }.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void notifyOne() noexcept { cv_.notify_one(); }
  void notifyAll() noexcept { cv_.notify_all(); }

  // Blocks until notified (or woken spuriously).
  void wait(Mutex& mu) GYRE_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  // As wait(mu); false once `deadline` has passed.
  template <typename C, typename D>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<C, D>& deadline) GYRE_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline) == std::cv_status::no_timeout;
  }
  // As waitUntil(mu, now + timeout).
  template <typename R, typename P>
  bool waitFor(Mutex& mu, const std::chrono::duration<R, P>& timeout) GYRE_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout) == std::cv_status::no_timeout;
  }

  // Blocks until done() holds. The analysis cannot tie `mu` to the mutex that the predicate
  // requires (its own GYRE_REQUIRES, checked where the lambda is written), hence no analysis
  // here; done() runs only with mu held.
  template <typename Predicate>
  void wait(Mutex& mu, Predicate done) GYRE_REQUIRES(mu) GYRE_NO_THREAD_SAFETY_ANALYSIS {
    while (!done()) wait(mu);
  }
  // Blocks until done() holds or `deadline` passes; returns done() (std's semantics).
  template <typename C, typename D, typename Predicate>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<C, D>& deadline, Predicate done)
      GYRE_REQUIRES(mu) GYRE_NO_THREAD_SAFETY_ANALYSIS {
    while (!done())
      if (!waitUntil(mu, deadline)) return done();
    return true;
  }
  // As waitUntil(mu, now + timeout, done).
  template <typename R, typename P, typename Predicate>
  bool waitFor(Mutex& mu, const std::chrono::duration<R, P>& timeout, Predicate done) GYRE_REQUIRES(mu) {
    return waitUntil(mu, std::chrono::steady_clock::now() + timeout, std::move(done));
  }

 private:
  // The caller's hold on `mu`, lent to std::condition_variable for one wait and handed back
  // (still locked) when the wait returns or throws.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace gyre
