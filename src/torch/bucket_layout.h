// Which gradients share a bucket: pure arithmetic, no libtorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gyre::torch {

// One gradient to place: its element count, element size and dtype tag (buckets hold one dtype).
struct GradientSlot {
  std::int64_t numel = 0;
  std::size_t elementBytes = 4;
  int dtype = 0;
};

struct BucketPlan {
  int dtype = 0;
  std::vector<std::size_t> slots;     // indices into the slot list, in bucket order
  std::vector<std::int64_t> offsets;  // element offset of each slot in the bucket
  std::int64_t numel = 0;
};

// Walks `order` (indices into `slots`) and closes a bucket when the next gradient has another
// dtype or would take it past its cap: `firstCapBytes` for the first bucket, `capBytes` after.
// A gradient larger than the cap gets a bucket of its own. Slots with no elements still get a
// place (and an offset), so every parameter has a view.
std::vector<BucketPlan> planBuckets(const std::vector<GradientSlot>& slots, const std::vector<std::size_t>& order,
                                    std::size_t firstCapBytes, std::size_t capBytes);

// What one allreduce of a bucket costs, for planning: latency + bytes × secondsPerByte.
struct AllreduceCost {
  double latency = 50e-6;
  double secondsPerByte = 1.0 / 4e9;
  double operator()(std::size_t bytes) const { return latency + static_cast<double>(bytes) * secondsPerByte; }
};

// Buckets from an observed backward pass: `order` is the order the gradients became ready and
// `readySeconds[k]` when order[k] did (non-decreasing). Buckets are contiguous runs of `order`,
// one dtype, at most `capBytes` (a larger gradient alone), allreduced one after another, each
// once its last gradient is ready and the previous allreduce is done. Of the splits, the plan
// finishes the last allreduce earliest (by `cost`), and among those uses the fewest buckets: a
// bucket closes where the gradients after it come late enough that reducing it early pays, and
// gradients that become ready together stay together (so a layer's bias does not hold its
// weight back, nor the reverse).
std::vector<BucketPlan> planBucketsByReadyTime(const std::vector<GradientSlot>& slots,
                                               const std::vector<std::size_t>& order,
                                               const std::vector<double>& readySeconds, std::size_t capBytes,
                                               const AllreduceCost& cost = {});

}  // namespace gyre::torch
