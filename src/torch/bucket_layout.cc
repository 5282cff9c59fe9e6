#include "torch/bucket_layout.h"

#include <algorithm>
#include <limits>

#include "common/check.h"

namespace gyre::torch {
namespace {

std::size_t bytesOf(const GradientSlot& slot) { return static_cast<std::size_t>(slot.numel) * slot.elementBytes; }

void append(BucketPlan& plan, const GradientSlot& slot, std::size_t index) {
  plan.slots.push_back(index);
  plan.offsets.push_back(plan.numel);
  plan.numel += slot.numel;
}

}  // namespace

std::vector<BucketPlan> planBuckets(const std::vector<GradientSlot>& slots, const std::vector<std::size_t>& order,
                                    std::size_t firstCapBytes, std::size_t capBytes) {
  std::vector<BucketPlan> plans;
  std::size_t bytes = 0;  // in the open bucket, plans.back()
  for (std::size_t index : order) {
    const GradientSlot& slot = slots.at(index);
    const std::size_t slotBytes = bytesOf(slot);
    const std::size_t cap = plans.size() == 1 ? firstCapBytes : capBytes;
    const bool fits = !plans.empty() && plans.back().dtype == slot.dtype && bytes + slotBytes <= cap;
    if (!fits) {
      plans.push_back(BucketPlan{slot.dtype, {}, {}, 0});
      bytes = 0;
    }
    append(plans.back(), slot, index);
    bytes += slotBytes;
  }
  return plans;
}

std::vector<BucketPlan> planBucketsByReadyTime(const std::vector<GradientSlot>& slots,
                                               const std::vector<std::size_t>& order,
                                               const std::vector<double>& readySeconds, std::size_t capBytes,
                                               const AllreduceCost& cost) {
  if (readySeconds.size() != order.size())
    GYRE_THROW(InvalidArgument, "planBucketsByReadyTime: one ready time per gradient in the order");
  const std::size_t n = order.size();
  if (n == 0) return {};
  // finish[j][c]: the earliest the first j gradients can all be reduced in c buckets; from[j][c]:
  // where the last of those buckets starts. With the count in the state, the plan with the
  // fewest buckets among those that finish (nearly) first can be read back.
  const std::size_t maxBuckets = std::min<std::size_t>(n, 256);
  const std::size_t width = maxBuckets + 1;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  constexpr double kTie = 1e-6;
  std::vector<double> finish((n + 1) * width, kNever);
  std::vector<double> sum((n + 1) * width, 0);  // of every bucket's finish: lower = reduced sooner
  std::vector<std::size_t> from((n + 1) * width, 0);
  finish[0] = 0;
  for (std::size_t j = 1; j <= n; ++j) {
    std::size_t bytes = 0;
    double ready = 0;
    const int dtype = slots.at(order[j - 1]).dtype;
    // The bucket holds order[i .. j-1]; grow it backwards while it stays one dtype under the cap.
    for (std::size_t i = j; i-- > 0;) {
      const GradientSlot& slot = slots.at(order[i]);
      if (slot.dtype != dtype) break;
      if (i + 1 < j && bytes + bytesOf(slot) > capBytes) break;
      bytes += bytesOf(slot);
      ready = std::max(ready, readySeconds[i]);
      const double reduce = cost(bytes);
      for (std::size_t c = 1; c <= maxBuckets; ++c) {
        const double before = finish[i * width + c - 1];
        if (before == kNever) continue;
        const double done = std::max(before, ready) + reduce;
        const double total = sum[i * width + c - 1] + done;
        // Finishing within a microsecond is a tie: then the plan that reduces sooner wins (it
        // leaves slack for a slower step), e.g. a layer's bias goes with its weight, not ahead.
        const double current = finish[j * width + c];
        if (done < current - kTie || (done <= current + kTie && total < sum[j * width + c])) {
          finish[j * width + c] = done;
          sum[j * width + c] = total;
          from[j * width + c] = i;
        }
      }
    }
  }
  double best = kNever;
  for (std::size_t c = 1; c <= maxBuckets; ++c) best = std::min(best, finish[n * width + c]);
  // Too many buckets to plan (a huge model under a small cap): the cap alone decides.
  if (best == kNever) return planBuckets(slots, order, capBytes, capBytes);
  // Another bucket must gain a tenth of an allreduce's latency to be worth it.
  std::size_t buckets = 1;
  while (finish[n * width + buckets] > best + cost.latency / 10) ++buckets;
  std::vector<std::size_t> starts;
  for (std::size_t j = n, c = buckets; j > 0; --c) {
    j = from[j * width + c];
    starts.push_back(j);
  }
  std::reverse(starts.begin(), starts.end());
  std::vector<BucketPlan> plans;
  for (std::size_t b = 0; b < starts.size(); ++b) {
    const std::size_t end = b + 1 < starts.size() ? starts[b + 1] : n;
    BucketPlan plan{slots.at(order[starts[b]]).dtype, {}, {}, 0};
    for (std::size_t k = starts[b]; k < end; ++k) append(plan, slots.at(order[k]), order[k]);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace gyre::torch
