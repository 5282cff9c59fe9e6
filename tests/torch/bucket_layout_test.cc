// Bucket planning from observed ready times (src/torch/bucket_layout.h): pure arithmetic.
#include "torch/bucket_layout.h"

#include <gtest/gtest.h>

#include "gyre/errors.h"

namespace gyre::torch {
namespace {

GradientSlot floats(std::int64_t n) { return GradientSlot{n, 4, 6}; }

std::vector<std::vector<std::size_t>> groups(const std::vector<BucketPlan>& plans) {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& plan : plans) out.push_back(plan.slots);
  return out;
}

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

// 100 µs + 1 ns per byte: easy to reason about.
const AllreduceCost kCost{100e-6, 1e-9};

TEST(BucketsByReadyTime, GradientsReadyTogetherShareOneBucket) {
  // A layer's weight and bias become ready at the same moment: splitting them only adds latency.
  const std::vector<GradientSlot> slots = {floats(10), floats(100'000), floats(10), floats(200'000)};
  const auto plans = planBucketsByReadyTime(slots, identity(4), {0, 0, 0, 0}, 25u << 20, kCost);
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{0, 1, 2, 3}}));
  EXPECT_EQ(plans[0].offsets, (std::vector<std::int64_t>{0, 10, 100'010, 100'020}));
  EXPECT_EQ(plans[0].numel, 300'020);
}

TEST(BucketsByReadyTime, ALongGapSplitsSoTheEarlyGradientsOverlapIt) {
  // The cnn's shape: fc2 and fc1 early, then a long convolution backward, then conv1.
  const std::vector<GradientSlot> slots = {floats(1'290), floats(128), floats(401'408), floats(18'496),
                                           floats(320)};
  const std::vector<double> ready = {0, 1e-3, 1e-3, 20e-3, 30e-3};
  const auto plans = planBucketsByReadyTime(slots, identity(5), ready, 25u << 20, kCost);
  // fc2, fc1 and conv2 reduce during the convolutions (whether conv2 joins fc1 or goes alone,
  // both finish when conv1's does: the fewer buckets win); conv1 alone is all that is left at
  // the end, instead of holding back fc1's 1.6 MB as a cap-only plan would.
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{0, 1, 2, 3}, {4}}));
}

TEST(BucketsByReadyTime, ABucketThatWouldDelayTheEndIsSplit) {
  // conv2's gradient is large and ready well before conv1's: reducing it with conv1 would end
  // later than reducing it first, so it gets its own bucket.
  const std::vector<GradientSlot> slots = {floats(401'408), floats(1'000'000), floats(320)};
  const std::vector<double> ready = {0, 20e-3, 22e-3};
  const auto plans = planBucketsByReadyTime(slots, identity(3), ready, 25u << 20, kCost);
  // {0,1} ready at 20 ms ends at 25.7 ms; {2} after it at 25.8. {0},{1},{2}: 1.7, 24.1, 24.2.
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}}));
}

TEST(BucketsByReadyTime, ABiasReadyWithTheNextLayerIsNotLeftBehind) {
  // The mlp: fc3, fc2, then fc1's bias and weight together, much later. The cut falls before
  // fc1's bias (the first-cap planner put that bias in the first bucket, holding it back).
  const std::vector<GradientSlot> slots = {floats(10), floats(2'560), floats(256), floats(131'072), floats(512),
                                           floats(401'408)};
  const std::vector<double> ready = {0, 0, 0.4e-3, 0.4e-3, 1.2e-3, 1.2e-3};
  const auto plans = planBucketsByReadyTime(slots, identity(6), ready, 25u << 20, kCost);
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{0, 1, 2, 3}, {4, 5}}));
}

TEST(BucketsByReadyTime, CapAndDtypeStillBound) {
  const std::vector<GradientSlot> slots = {floats(100), floats(100), GradientSlot{100, 8, 7}, floats(1'000),
                                           floats(100)};
  const auto plans = planBucketsByReadyTime(slots, identity(5), {0, 0, 0, 0, 0}, 800, kCost);
  // 800 bytes: two 400-byte floats fit; the doubles stand apart; the 4000-byte gradient is alone.
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ(plans[1].dtype, 7);
}

TEST(BucketsByReadyTime, FollowsTheGivenOrderAndRejectsMismatchedTimes) {
  const std::vector<GradientSlot> slots = {floats(4), floats(4), floats(4)};
  const auto plans = planBucketsByReadyTime(slots, {2, 0, 1}, {0, 0, 0}, 1 << 20, kCost);
  EXPECT_EQ(groups(plans), (std::vector<std::vector<std::size_t>>{{2, 0, 1}}));
  EXPECT_TRUE(planBucketsByReadyTime({}, {}, {}, 1 << 20, kCost).empty());
  EXPECT_THROW(planBucketsByReadyTime(slots, {0, 1, 2}, {0, 0}, 1 << 20, kCost), InvalidArgument);
}

}  // namespace
}  // namespace gyre::torch
