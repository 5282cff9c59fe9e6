#include "torch/bucket_layout.h"

namespace gyre::torch {

std::vector<BucketPlan> planBuckets(const std::vector<GradientSlot>& slots, const std::vector<std::size_t>& order,
                                    std::size_t firstCapBytes, std::size_t capBytes) {
  std::vector<BucketPlan> plans;
  std::size_t bytes = 0;  // in the open bucket, plans.back()
  for (std::size_t index : order) {
    const GradientSlot& slot = slots.at(index);
    const std::size_t slotBytes = static_cast<std::size_t>(slot.numel) * slot.elementBytes;
    const std::size_t cap = plans.size() == 1 ? firstCapBytes : capBytes;
    const bool fits = !plans.empty() && plans.back().dtype == slot.dtype && bytes + slotBytes <= cap;
    if (!fits) {
      plans.push_back(BucketPlan{slot.dtype, {}, {}, 0});
      bytes = 0;
    }
    BucketPlan& plan = plans.back();
    plan.slots.push_back(index);
    plan.offsets.push_back(plan.numel);
    plan.numel += slot.numel;
    bytes += slotBytes;
  }
  return plans;
}

}  // namespace gyre::torch
