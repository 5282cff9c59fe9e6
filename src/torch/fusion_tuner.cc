#include "torch/fusion_tuner.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"

namespace gyre::torch::detail {
namespace {

std::string describe(const FusionChoice& c) {
  char cap[32];
  std::snprintf(cap, sizeof cap, "%g", static_cast<double>(c.capBytes) / (1 << 20));
  return std::string("bucket cap ") + cap + " MiB, allreduce " + std::string(gyre::toString(c.algorithm));
}

}  // namespace

FusionTuner::FusionTuner(std::vector<std::size_t> caps, AllreduceAlgorithm first,
                         std::vector<AllreduceAlgorithm> algorithms, int warmupSteps, int timedSteps)
    : algorithms_(std::move(algorithms)), warmupSteps_(warmupSteps), timedSteps_(timedSteps) {
  GYRE_ARG_CHECK(!caps.empty(), "the fusion tuner needs at least one bucket cap");
  GYRE_ARG_CHECK(warmupSteps >= 0 && timedSteps >= 1, "the fusion tuner needs a timed step per trial");
  for (std::size_t cap : caps) {
    GYRE_ARG_CHECK(cap > 0, "bucket caps must be positive");
    pending_.push_back({cap, first});
  }
  std::erase(algorithms_, first);
  startNext();
}

void FusionTuner::startNext() {
  if (pending_.empty() && !capsDone_) {
    capsDone_ = true;
    for (AllreduceAlgorithm a : algorithms_) pending_.push_back({best().choice.capBytes, a});
  }
  if (pending_.empty()) {
    done_ = true;
    current_ = best().choice;
    return;
  }
  current_ = pending_.front();
  pending_.erase(pending_.begin());
  stepsInTrial_ = 0;
  timed_.clear();
}

bool FusionTuner::record(double seconds) {
  if (done_) return false;
  if (stepsInTrial_++ >= warmupSteps_) timed_.push_back(seconds);
  return stepsInTrial_ == warmupSteps_ + timedSteps_;
}

const FusionTrial& FusionTuner::best() const {
  GYRE_ARG_CHECK(!trials_.empty(), "no trial of the fusion tuner has finished");
  return *std::min_element(trials_.begin(), trials_.end(), [](const FusionTrial& a, const FusionTrial& b) {
    return a.stepSeconds < b.stepSeconds;
  });
}

double FusionTuner::trialSeconds() const {
  if (timed_.empty()) return 0;
  std::vector<double> sorted = timed_;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

void FusionTuner::finishTrial(double agreedSeconds) {
  GYRE_ARG_CHECK(!done_, "the fusion tuner is done");
  trials_.push_back({current_, agreedSeconds});
  startNext();
}

std::string FusionTuner::summary() const {
  if (trials_.empty()) return "not tuned";
  const FusionTrial& fastest = best();
  char head[64];
  std::snprintf(head, sizeof head, ": %.1f ms a step, the best of %zu tried (", fastest.stepSeconds * 1e3,
                trials_.size());
  std::string text = describe(fastest.choice) + head;
  for (std::size_t i = 0; i < trials_.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.1f ms", trials_[i].stepSeconds * 1e3);
    text += (i ? "; " : "") + describe(trials_[i].choice) + ms;
  }
  return text + ")";
}

}  // namespace gyre::torch::detail
