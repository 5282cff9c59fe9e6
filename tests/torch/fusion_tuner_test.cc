// FusionTuner (src/torch/fusion_tuner.h): every cap with auto, then each algorithm with the best
// cap; the warm-up step is not timed, a trial's time is its median step, and the fastest stays.
#include "torch/fusion_tuner.h"

#include <gtest/gtest.h>

#include <map>

#include "gyre/errors.h"

namespace gyre::torch::detail {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs the tuner to the end with a step time per choice (plus a slow first step in each trial
// and one outlier step), agreeing on each trial's own median. Returns the steps it took.
int runToEnd(FusionTuner& tuner, const std::map<std::pair<std::size_t, AllreduceAlgorithm>, double>& times) {
  int steps = 0;
  while (!tuner.done() && steps < 1000) {
    const FusionChoice c = tuner.current();
    const double t = times.at({c.capBytes, c.algorithm});
    for (int k = 0;; ++k) {
      ++steps;
      const double step = k == 0 ? 10 * t : (k == 2 ? 5 * t : t);  // warm-up, and one outlier
      if (tuner.record(step)) break;
    }
    EXPECT_DOUBLE_EQ(tuner.trialSeconds(), t);  // the median of t, 5t, t, t
    tuner.finishTrial(tuner.trialSeconds());
  }
  return steps;
}

TEST(FusionTuner, TriesEveryCapThenEveryAlgorithmWithTheBestCapAndKeepsTheFastest) {
  using A = AllreduceAlgorithm;
  FusionTuner tuner({1 * kMiB, 4 * kMiB, 16 * kMiB}, A::kAuto, {A::kRing, A::kAuto, A::kHalvingDoubling});
  EXPECT_EQ(tuner.current(), (FusionChoice{1 * kMiB, A::kAuto}));
  const std::map<std::pair<std::size_t, A>, double> times = {{{1 * kMiB, A::kAuto}, 0.030},
                                                             {{4 * kMiB, A::kAuto}, 0.020},
                                                             {{16 * kMiB, A::kAuto}, 0.025},
                                                             {{4 * kMiB, A::kRing}, 0.018},
                                                             {{4 * kMiB, A::kHalvingDoubling}, 0.022}};
  EXPECT_EQ(runToEnd(tuner, times), 5 * 5);  // auto is not tried twice
  ASSERT_TRUE(tuner.done());
  EXPECT_EQ(tuner.current(), (FusionChoice{4 * kMiB, A::kRing}));
  ASSERT_EQ(tuner.trials().size(), 5u);
  EXPECT_EQ(tuner.trials()[3].choice, (FusionChoice{4 * kMiB, A::kRing}));
  EXPECT_FALSE(tuner.record(1.0));  // done: nothing more to time
  const std::string summary = tuner.summary();
  EXPECT_EQ(summary.rfind("bucket cap 4 MiB, allreduce ring: 18.0 ms a step, the best of 5 tried (", 0), 0u)
      << summary;
  EXPECT_NE(summary.find("bucket cap 16 MiB, allreduce auto 25.0 ms"), std::string::npos) << summary;
}

TEST(FusionTuner, TheConfiguredChoiceStaysWhenNothingBeatsIt) {
  using A = AllreduceAlgorithm;
  FusionTuner tuner({25 * kMiB, 1 * kMiB}, A::kTree, {A::kRing, A::kAuto});
  runToEnd(tuner, {{{25 * kMiB, A::kTree}, 0.010},
                   {{1 * kMiB, A::kTree}, 0.012},
                   {{25 * kMiB, A::kRing}, 0.011},
                   {{25 * kMiB, A::kAuto}, 0.013}});
  EXPECT_EQ(tuner.current(), (FusionChoice{25 * kMiB, A::kTree}));
  EXPECT_EQ(tuner.trials().size(), 4u);
}

TEST(FusionTuner, RefusesNoCapsAndNoTimedSteps) {
  EXPECT_THROW(FusionTuner({}, AllreduceAlgorithm::kAuto, {}), InvalidArgument);
  EXPECT_THROW(FusionTuner({kMiB}, AllreduceAlgorithm::kAuto, {}, 1, 0), InvalidArgument);
  EXPECT_THROW(FusionTuner({0}, AllreduceAlgorithm::kAuto, {}), InvalidArgument);
}

}  // namespace
}  // namespace gyre::torch::detail
