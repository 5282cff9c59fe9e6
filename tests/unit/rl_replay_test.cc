// gyre::rl::PrioritizedReplay: draws in proportion to priority^α (uniform at α = 0), importance
// weights (N·P)^-β over the sample's largest, new priorities taking effect, the ring overwriting
// the oldest, and bad input refused.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gyre/errors.h"
#include "gyre/rl/replay.h"

namespace gyre::rl {
namespace {

// n transitions of 1-value observations, transition i observing i.
Transitions numbered(int from, int n) {
  Transitions t;
  t.observationSize = 1;
  for (int i = from; i < from + n; ++i) {
    t.observations.push_back(static_cast<float>(i));
    t.nextObservations.push_back(static_cast<float>(i) + 0.5f);
    t.actions.push_back(i % 2);
    t.returns.push_back(static_cast<float>(i) * 2);
    t.discounts.push_back(0.9f);
  }
  return t;
}

// How often each observation is drawn in `draws` samples of 100.
std::map<int, int> counts(PrioritizedReplay& r, int draws, double beta = 0.4) {
  std::map<int, int> c;
  for (int d = 0; d < draws; ++d) {
    const ReplaySample s = r.sample(100, beta);
    for (std::size_t i = 0; i < s.batch.size(); ++i) {
      const int obs = static_cast<int>(s.batch.observations[i]);
      ++c[obs];
      EXPECT_EQ(s.batch.returns[i], static_cast<float>(obs) * 2);  // whole rows travel together
      EXPECT_EQ(s.batch.nextObservations[i], static_cast<float>(obs) + 0.5f);
      EXPECT_EQ(s.indices[i], obs);
    }
  }
  return c;
}

TEST(RlReplay, DrawsInProportionToPriorityToTheAlpha) {
  PrioritizedReplay r(8, 0.5, 7);
  r.add(numbered(0, 4), {1, 4, 9, 0});  // ^0.5: 1, 2, 3 and (floored at 1e-6) ~0
  EXPECT_EQ(r.size(), 4u);
  EXPECT_NEAR(r.total(), 6.0, 1e-2);
  const std::map<int, int> c = counts(r, 600);  // 60,000 draws
  EXPECT_NEAR(c.at(0) / 60000.0, 1.0 / 6, 0.01);
  EXPECT_NEAR(c.at(1) / 60000.0, 2.0 / 6, 0.01);
  EXPECT_NEAR(c.at(2) / 60000.0, 3.0 / 6, 0.01);
  EXPECT_LT(c.count(3) ? c.at(3) : 0, 50);  // 1e-3 / 6 of the mass: ~10 draws
}

TEST(RlReplay, AlphaZeroIsUniformAndWeightsAreOneThen) {
  PrioritizedReplay r(4, 0.0, 1);
  r.add(numbered(0, 4), {1, 100, 0.5, 3});
  const std::map<int, int> c = counts(r, 400);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(c.at(i) / 40000.0, 0.25, 0.01) << i;
  for (float w : r.sample(10, 1.0).weights) EXPECT_FLOAT_EQ(w, 1.0f);
}

TEST(RlReplay, WeightsAreInverseProbabilityToTheBetaOverTheLargest) {
  PrioritizedReplay r(2, 1.0, 3);
  r.add(numbered(0, 2), {1, 3});  // P = 1/4, 3/4
  const ReplaySample s = r.sample(200, 1.0);
  for (std::size_t i = 0; i < s.indices.size(); ++i)  // (2·P)^-1 / (2·1/4)^-1: 1 and 1/3
    EXPECT_FLOAT_EQ(s.weights[i], s.indices[i] == 0 ? 1.0f : 1.0f / 3) << i;
}

TEST(RlReplay, NewPrioritiesTakeEffectAndTheRingOverwritesTheOldest) {
  PrioritizedReplay r(4, 1.0, 5);
  r.add(numbered(0, 4), {1, 1, 1, 1});
  r.updatePriorities({0, 1, 2}, {1e-6f, 1e-6f, 1e-6f});
  std::map<int, int> c = counts(r, 20);
  EXPECT_GT(c[3], 1990);  // nearly all the mass is on 3
  // Two more overwrite places 0 and 1; without priorities they get the largest seen (1).
  r.add(numbered(10, 2), {});
  EXPECT_EQ(r.size(), 4u);
  EXPECT_EQ(r.added(), 6);
  c.clear();
  for (int d = 0; d < 50; ++d) {
    const ReplaySample s = r.sample(40, 0.5);
    for (float o : s.batch.observations) ++c[static_cast<int>(o)];
  }
  EXPECT_EQ(c.count(0) + c.count(1), 0u);  // overwritten
  EXPECT_NEAR((c[10] + c[11] + c[3]) / 2000.0, 1.0, 1e-3);
}

TEST(RlReplay, BadInputIsRefused) {
  EXPECT_THROW(PrioritizedReplay(0, 0.5, 1), InvalidArgument);
  EXPECT_THROW(PrioritizedReplay(4, 1.5, 1), InvalidArgument);
  PrioritizedReplay r(4, 0.5, 1);
  EXPECT_THROW(r.sample(1, 0.4), InvalidArgument);  // empty
  EXPECT_THROW(r.add(numbered(0, 2), {1}), InvalidArgument);
  Transitions ragged = numbered(0, 2);
  ragged.returns.pop_back();
  EXPECT_THROW(r.add(ragged, {}), InvalidArgument);
  r.add(numbered(0, 2), {});
  Transitions wide = numbered(0, 1);
  wide.observationSize = 2;
  wide.observations.push_back(0);
  wide.nextObservations.push_back(0);
  EXPECT_THROW(r.add(wide, {}), InvalidArgument);
  EXPECT_THROW(r.updatePriorities({2}, {1}), InvalidArgument);  // only 0 and 1 are stored
  EXPECT_THROW(r.updatePriorities({0, 1}, {1}), InvalidArgument);
}

}  // namespace
}  // namespace gyre::rl
