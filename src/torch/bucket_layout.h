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

}  // namespace gyre::torch
