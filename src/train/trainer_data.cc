// The trainer's data side: each step's batch (from the epoch's loader, or assembled from the
// elastic sampler's shards), the GYRE_SAMPLE_LOG lines, and the bad records skipped.
#include <cstdio>
#include <string>

#include "common/check.h"
#include "common/clock.h"
#include "train/trainer_loop.h"

namespace gyre::train::detail {

std::vector<Trainer::StepPart> Trainer::nextBatch(std::optional<gyre::data::Loader>& loader) {
  std::vector<StepPart> parts;
  if (loader) {
    parts.push_back({loader->next(), 1, layout_.replica(), {}});
    dataWaitS_ += loader->lastWaitSeconds();
    GYRE_ENFORCE(static_cast<bool>(parts.back().batch), "the epoch's loader ran out of batches");
    if (sampleLog_) parts.back().samples = epochBatches_.at(static_cast<std::size_t>(parts.back().batch.index));
    return parts;
  }
  // Elastic: the sampler's place is part of the elastic state (rolled back with a commit), so the
  // batch is assembled here, step by step.
  const auto begin = Clock::now();
  // A shard's augmentations are drawn alike in every world: its batch index is (step, shard).
  const std::int64_t perStep = std::max(elasticSampler_->shards(), world_);
  for (gyre::torch::ElasticSampler::Part& part : elasticSampler_->parts()) {
    parts.push_back({data_.train->gather(part.indices, elasticSampler_->step() * perStep + part.shard),
                     part.weight, part.shard, {}});
    if (sampleLog_) parts.back().samples = part.indices;
    gyre::data::applyTransforms(parts.back().batch, transforms_,
                                augmentSeed(static_cast<int>(elasticSampler_->epoch()) + 1));
  }
  dataWaitS_ += seconds(Clock::now() - begin);
  return parts;
}

void Trainer::logSamples(int epoch, const std::vector<StepPart>& parts) {
  for (const StepPart& p : parts) {
    std::string line = "{\"epoch\": " + std::to_string(epoch) + ", \"step\": " + std::to_string(globalStep_ + 1) +
                       ", \"part\": " + std::to_string(p.part) + ", \"samples\": [";
    for (std::size_t i = 0; i < p.samples.size(); ++i) line += (i > 0 ? ", " : "") + std::to_string(p.samples[i]);
    line += "]}\n";
    std::fputs(line.c_str(), sampleLog_.get());
  }
  std::fflush(sampleLog_.get());
}

// The training samples this rank's batches left out (record shards read as the batches ask, with
// --skip-bad-records) since the last report: each rank says its own, as it met them.
void Trainer::reportSkips(int epoch) {
  const std::vector<std::string> skipped = data_.train->skipped();
  if (skipped.size() <= data_.skipsReported) return;
  std::printf("gyre train: epoch %d: worker %d left out %zu bad sample(s) (%zu in all, --skip-bad-records %lld):\n",
              epoch, group_.rank(), skipped.size() - data_.skipsReported, skipped.size(),
              static_cast<long long>(o_.skipBadRecords));
  for (std::size_t i = data_.skipsReported; i < skipped.size(); ++i) std::printf("  %s\n", skipped[i].c_str());
  std::fflush(stdout);
  data_.skipsReported = skipped.size();
}

}  // namespace gyre::train::detail
