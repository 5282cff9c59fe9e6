// The contract every Store must honour, as parameterized tests: a test file includes this once,
// then instantiates StoreContract with the stores it can make (tests/unit/store_contract_test.cc:
// the in-process ones; tests/process/etcd_store_test.cc: etcd clusters).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "gyre/errors.h"
#include "gyre/store.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using test::spawn;

using Bytes = Store::Bytes;
using std::chrono::milliseconds;

// One store under test, plus whatever keeps it alive; another() is a second, independent
// handle on the same data (a second client, a second file handle), as another rank would hold.
struct StoreUnderTest {
  std::shared_ptr<Store> store;
  std::function<std::shared_ptr<Store>()> another;
  std::shared_ptr<void> keepAlive;
};

// Thrown by a Kind's make() when its store cannot be tested here (its server cannot be
// installed): the test is skipped with `why`.
struct StoreSkipped {
  std::string why;
};

struct Kind {
  std::string name;
  std::function<StoreUnderTest()> make;
};

// gtest prints parameters in test names and failures; a Kind prints as its name.
void PrintTo(const Kind& kind, std::ostream* out) {
  *out << kind.name;
}

Bytes bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

class StoreContract : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    try {
      sut_ = GetParam().make();
    } catch (const StoreSkipped& skipped) {
      GTEST_SKIP() << skipped.why;
    }
    store_ = sut_.store;
  }
  StoreUnderTest sut_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreContract, SetThenGetReturnsTheValueAndOverwriteReplacesIt) {
  store_->set("a", bytes("one"));
  EXPECT_EQ(store_->get("a", milliseconds(1000)), bytes("one"));
  store_->set("a", bytes("two"));
  EXPECT_EQ(store_->getString("a", milliseconds(1000)), "two");
  store_->setString("b", "text");
  EXPECT_EQ(sut_.another()->getString("b", milliseconds(1000)), "text");
}

TEST_P(StoreContract, GetWaitsForASetFromAnotherThread) {
  auto other = sut_.another();
  const auto start = std::chrono::steady_clock::now();
  auto setter = spawn([&] {
    std::this_thread::sleep_for(milliseconds(150));
    other->setString("late", "arrived");
  });
  EXPECT_EQ(store_->getString("late", milliseconds(10000)), "arrived");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
  setter.join();
}

TEST_P(StoreContract, HugeTimeoutsMeanWaitAsLongAsNeeded) {
  auto other = sut_.another();
  auto setter = spawn([&] {
    std::this_thread::sleep_for(milliseconds(50));
    other->setString("eventually", "yes");
  });
  store_->wait({"eventually"}, milliseconds::max());
  EXPECT_EQ(store_->getString("eventually", milliseconds::max()), "yes");
}

TEST_P(StoreContract, WaitReturnsOnceEveryKeyExists) {
  auto other = sut_.another();
  auto setter = spawn([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(milliseconds(30));
      other->setString("w" + std::to_string(i), "x");
    }
  });
  store_->wait({"w0", "w1", "w2"}, milliseconds(10000));
  EXPECT_TRUE(store_->check({"w0", "w1", "w2"}));
  setter.join();
}

TEST_P(StoreContract, ConcurrentAddsFromEightThreadsSumExactly) {
  constexpr int kThreads = 8, kAdds = 50;
  std::vector<std::vector<std::int64_t>> seen(kThreads);
  test::runThreads(kThreads, [&](int t) {
    auto handle = t % 2 == 0 ? store_ : sut_.another();
    for (int i = 0; i < kAdds; ++i) seen[t].push_back(handle->add("counter", 1));
  });
  EXPECT_EQ(store_->add("counter", 0), kThreads * kAdds);
  // Every add saw a distinct intermediate total: no update was lost or applied twice.
  std::vector<std::int64_t> all;
  for (const auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(kThreads * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
}

TEST_P(StoreContract, AddStartsAtZeroAcceptsNegativeDeltasAndIsReadableAsText) {
  EXPECT_EQ(store_->add("n", 5), 5);
  EXPECT_EQ(store_->add("n", -7), -2);
  EXPECT_EQ(store_->getString("n", milliseconds(1000)), "-2");
  store_->setString("text", "not a number");
  EXPECT_THROW(store_->add("text", 1), InvalidArgument);
  EXPECT_EQ(store_->getString("text", milliseconds(1000)), "not a number");
}

TEST_P(StoreContract, CompareSetFollowsItsContract) {
  // Absent key, empty expected: set.
  EXPECT_EQ(store_->compareSet("c", {}, bytes("v1")), bytes("v1"));
  // Present key, matching expected: swapped.
  EXPECT_EQ(store_->compareSet("c", bytes("v1"), bytes("v2")), bytes("v2"));
  // Present key, other expected: unchanged, current value returned.
  EXPECT_EQ(store_->compareSet("c", bytes("zzz"), bytes("v3")), bytes("v2"));
  // Present key, empty expected ("absent"): unchanged.
  EXPECT_EQ(store_->compareSet("c", {}, bytes("v4")), bytes("v2"));
  EXPECT_EQ(store_->get("c", milliseconds(1000)), bytes("v2"));
  // Absent key, non-empty expected: nothing stored.
  EXPECT_EQ(store_->compareSet("absent", bytes("x"), bytes("y")), Bytes{});
  EXPECT_FALSE(store_->check({"absent"}));
}

TEST_P(StoreContract, CompareSetElectsExactlyOneWinner) {
  std::atomic<int> winners{0};
  test::runThreads(6, [&](int t) {
    auto handle = t % 2 == 0 ? store_ : sut_.another();
    const Bytes mine = bytes("rank" + std::to_string(t));
    if (handle->compareSet("leader", {}, mine) == mine) ++winners;
  });
  EXPECT_EQ(winners.load(), 1);
}

TEST_P(StoreContract, DeleteKeyReportsWhetherTheKeyExisted) {
  store_->setString("d", "x");
  EXPECT_TRUE(store_->deleteKey("d"));
  EXPECT_FALSE(store_->deleteKey("d"));
  EXPECT_FALSE(store_->check({"d"}));
  EXPECT_THROW(store_->get("d", milliseconds(50)), TimeoutError);
  store_->setString("d", "again");
  EXPECT_EQ(store_->getString("d", milliseconds(1000)), "again");
}

TEST_P(StoreContract, CheckDoesNotWait) {
  EXPECT_TRUE(store_->check({}));
  store_->setString("k1", "1");
  EXPECT_TRUE(store_->check({"k1"}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(store_->check({"k1", "k2"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

TEST_P(StoreContract, WaitAndGetTimeOutWithinBounds) {
  for (int which = 0; which < 2; ++which) {
    const auto start = std::chrono::steady_clock::now();
    if (which == 0) {
      EXPECT_THROW(store_->wait({"never"}, milliseconds(200)), TimeoutError);
    } else {
      EXPECT_THROW(store_->get("never", milliseconds(200)), TimeoutError);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed, milliseconds(190));
    EXPECT_LT(elapsed, milliseconds(3000));
  }
  // The store still works after a time-out.
  store_->setString("after", "ok");
  EXPECT_EQ(store_->getString("after", milliseconds(1000)), "ok");
}

TEST_P(StoreContract, ZeroTimeoutMeansTheStoreDefault) {
  store_->setTimeout(milliseconds(150));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store_->get("never"), TimeoutError);
  EXPECT_THROW(store_->wait({"never"}), TimeoutError);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(280));
  EXPECT_LT(elapsed, milliseconds(5000));
}

TEST_P(StoreContract, EmptyAndBinaryValuesRoundTrip) {
  store_->set("empty", {});
  EXPECT_TRUE(store_->check({"empty"}));
  EXPECT_EQ(store_->get("empty", milliseconds(1000)), Bytes{});
  Bytes all(256);
  std::iota(all.begin(), all.end(), 0);
  store_->set("binary", all);
  EXPECT_EQ(sut_.another()->get("binary", milliseconds(1000)), all);
  const std::string binaryKey("k\0\xff/", 4);
  store_->setString(binaryKey, "bk");
  EXPECT_EQ(store_->getString(binaryKey, milliseconds(1000)), "bk");
}

TEST_P(StoreContract, LargeValueRoundTrips) {
  Bytes big(1 << 20);
  std::mt19937 rng(42);
  for (auto& b : big) b = static_cast<std::uint8_t>(rng());
  store_->set("big", big);
  EXPECT_EQ(sut_.another()->get("big", milliseconds(10000)), big);
}

TEST_P(StoreContract, OversizedKeysAndValuesAreInvalidArguments) {
  EXPECT_THROW(store_->set(std::string(5000, 'k'), bytes("v")), InvalidArgument);
  EXPECT_THROW(store_->set("k", Bytes((64 << 20) + 1)), InvalidArgument);
  // The store is unharmed.
  store_->setString("fine", "yes");
  EXPECT_EQ(store_->getString("fine", milliseconds(1000)), "yes");
}

}  // namespace
}  // namespace gyre
