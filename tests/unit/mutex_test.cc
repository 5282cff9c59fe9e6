// common/mutex.h: Mutex, MutexLock, UniqueLock and CondVar behave as their std counterparts,
// and (in the clang build) the annotations below are checked by -Wthread-safety.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace gyre {
namespace {

// True when `mu` was free (it is then released again).
bool wasFree(Mutex& mu) {
  if (!mu.try_lock()) return false;
  mu.unlock();
  return true;
}

// Asks another thread, so that a mutex this thread holds reads as taken.
bool freeForAnotherThread(Mutex& mu) {
  bool free = false;
  std::thread([&] { free = wasFree(mu); }).join();
  return free;
}

class Counter {
 public:
  void add() GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    addLocked();
  }
  int value() const GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return value_;
  }

 private:
  void addLocked() GYRE_REQUIRES(mu_) { ++value_; }

  mutable Mutex mu_;
  int value_ GYRE_GUARDED_BY(mu_) = 0;
};

TEST(Mutex, GuardedCounterCountsEveryIncrementOfTwoThreads) {
  constexpr int kIncrements = 100000;
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) counter.add();
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 2 * kIncrements);
}

TEST(Mutex, MutexLockHoldsTheMutexForItsScope) {
  Mutex mu;
  {
    MutexLock lock(mu);
    EXPECT_FALSE(freeForAnotherThread(mu));
  }
  EXPECT_TRUE(freeForAnotherThread(mu));
}

TEST(Mutex, UniqueLockReleasesAndTakesItAgain) {
  Mutex mu;
  {
    UniqueLock lock(mu);
    EXPECT_FALSE(freeForAnotherThread(mu));
    lock.unlock();
    EXPECT_TRUE(freeForAnotherThread(mu));
    lock.lock();
    EXPECT_FALSE(freeForAnotherThread(mu));
  }
  EXPECT_TRUE(freeForAnotherThread(mu));
  {
    UniqueLock lock(mu);
    lock.unlock();  // the destructor must not unlock it a second time
  }
  EXPECT_TRUE(freeForAnotherThread(mu));
}

TEST(Mutex, IsLockableForStdLocks) {  // as Environment::lock() uses it (transport/mpi)
  Mutex mu;
  {
    std::unique_lock<Mutex> lock(mu);
    EXPECT_TRUE(lock.owns_lock());
    EXPECT_FALSE(freeForAnotherThread(mu));
  }
  EXPECT_TRUE(freeForAnotherThread(mu));
}

class Flag {
 public:
  void set() GYRE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      set_ = true;
    }
    changed_.notifyAll();
  }
  // Waits for set(); counts the waiters (so a test knows when one is blocked).
  void wait() GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++waiters_;
    changed_.notifyAll();
    changed_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return set_; });
  }
  bool waitFor(std::chrono::milliseconds timeout) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return changed_.waitFor(mu_, timeout, [&]() GYRE_REQUIRES(mu_) { return set_; });
  }
  bool waitUntil(Clock::time_point deadline) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return changed_.waitUntil(mu_, deadline, [&]() GYRE_REQUIRES(mu_) { return set_; });
  }
  void awaitWaiters(int n) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (waiters_ < n) changed_.wait(mu_);
  }

 private:
  Mutex mu_;
  CondVar changed_;
  bool set_ GYRE_GUARDED_BY(mu_) = false;
  int waiters_ GYRE_GUARDED_BY(mu_) = 0;
};

TEST(CondVar, WaitersWakeWhenThePredicateBecomesTrue) {
  Flag flag;
  bool woke[2] = {false, false};
  std::thread first([&] {
    flag.wait();
    woke[0] = true;
  });
  std::thread second([&] { woke[1] = flag.waitFor(std::chrono::minutes(10)); });
  flag.awaitWaiters(1);
  flag.set();
  first.join();
  second.join();
  EXPECT_TRUE(woke[0]);
  EXPECT_TRUE(woke[1]);
}

TEST(CondVar, TimedWaitsGiveThePredicateAtTheDeadline) {
  Flag flag;
  EXPECT_FALSE(flag.waitUntil(Clock::now()));  // past deadline, predicate false
  EXPECT_FALSE(flag.waitFor(std::chrono::milliseconds(1)));
  flag.set();
  EXPECT_TRUE(flag.waitUntil(Clock::now()));  // true at once, deadline or not
  EXPECT_TRUE(flag.waitFor(std::chrono::milliseconds(0)));
}

// Two threads take turns N times through one guarded variable: every wake-up is seen, none lost.
struct Turns {
  Mutex mu;
  CondVar turned;
  int turn GYRE_GUARDED_BY(mu) = 0;  // whose turn: 0 or 1
  int moves GYRE_GUARDED_BY(mu) = 0;

  void play(int me, int rounds) GYRE_EXCLUDES(mu) {
    for (int i = 0; i < rounds; ++i) {
      MutexLock lock(mu);
      turned.wait(mu, [&]() GYRE_REQUIRES(mu) { return turn == me; });
      ++moves;
      turn = 1 - me;
      turned.notifyOne();
    }
  }
};

TEST(CondVar, TwoThreadsTakeTurns) {
  constexpr int kRounds = 2000;
  Turns turns;
  std::thread other([&] { turns.play(1, kRounds); });
  turns.play(0, kRounds);
  other.join();
  MutexLock lock(turns.mu);
  EXPECT_EQ(turns.moves, 2 * kRounds);
  EXPECT_EQ(turns.turn, 0);
}

}  // namespace
}  // namespace gyre
