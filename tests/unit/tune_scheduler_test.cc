// gyre tune's schedulers, as pure decisions over made-up trials.
#include <gtest/gtest.h>

#include <cmath>

#include "gyre/errors.h"
#include "tune/scheduler.h"

namespace gyre::tune {
namespace {

Space lrSpace() {
  Space s;
  s.add(parseParam("lr=loguniform:1e-3:1", "x"));
  s.add(parseParam("batch=choice:32,64,128", "x"));
  return s;
}

// A trial that reported `metrics` for iterations 1, 2, ... at times id + iteration / 10.
Trial trialWith(int id, std::vector<double> metrics, TrialStatus status = TrialStatus::kPaused) {
  Trial t;
  t.id = id;
  t.status = status;
  t.config = {{"lr", 0.01 * (id + 1)}, {"batch", 64}};
  for (std::size_t i = 0; i < metrics.size(); ++i)
    t.results.push_back({static_cast<int>(i + 1), metrics[i], id + (i + 1) / 10.0, Json::object()});
  t.checkpointAt = t.iteration();
  return t;
}

SchedulerOptions options(const std::string& name, int maxT = 9) {
  SchedulerOptions o;
  o.name = name;
  o.maxT = maxT;
  return o;
}

TEST(TuneScheduler, RungsAndPercentile) {
  EXPECT_EQ(ashaRungs(1, 3, 9), (std::vector<int>{1, 3}));
  EXPECT_EQ(ashaRungs(1, 2, 10), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(ashaRungs(5, 3, 5), (std::vector<int>{}));
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2, 4}, 50), 2.5);          // numpy: 2.5
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 200.0 / 3), 7.0 / 3);  // numpy: 2.3333
  EXPECT_DOUBLE_EQ(percentile({5}, 90), 5);
}

TEST(TuneScheduler, OptionsOutOfRangeAreRefused) {
  const Space s = lrSpace();
  auto refuses = [&](SchedulerOptions o, const std::string& part) {
    try {
      makeScheduler(o, s);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted, expected an error with " << part;
  };
  refuses(options("bohb"), "unknown --scheduler bohb");
  SchedulerOptions o = options("asha");
  o.eta = 1;
  refuses(o, "--eta");
  o = options("asha");
  o.gracePeriod = 10;
  refuses(o, "--grace-period");
  o = options("pbt");
  o.quantile = 0.75;
  refuses(o, "--quantile");
  o = options("pbt");
  o.mutations = {"momentum"};
  refuses(o, "--pbt-mutate momentum: the search space has no parameter momentum");
  o = options("asha");
  o.mutations = {"lr"};
  refuses(o, "--pbt-mutate is for --scheduler pbt");
}

TEST(TuneScheduler, AshaPausesAtRungsAndPromotesTheTopThirdHighestRungFirst) {
  const Space s = lrSpace();
  const auto asha = makeScheduler(options("asha"), s);
  EXPECT_EQ(asha->describe(), "asha (promotion; eta 3, rungs 1, 3, 9)");
  std::vector<Trial> trials = {trialWith(0, {0.5}), trialWith(1, {0.7})};
  Context c{trials, s, 1, true};
  EXPECT_EQ(asha->stopAt(c, Trial{}), 1);
  EXPECT_EQ(asha->stopAt(c, trials[0]), 3);
  EXPECT_EQ(asha->onRunEnd(c, trials[0]).verdict, Verdict::kPause);
  // Two results at rung 1: floor(2/3) = 0 promotable, so a new trial starts.
  Plan p = asha->next(c);
  EXPECT_EQ(p.resume, -1);
  EXPECT_TRUE(p.allowNew);
  trials.push_back(trialWith(2, {0.6}));
  p = asha->next(c);
  EXPECT_EQ(p.resume, 1);  // the best of three
  // Promoted (now past rung 1): nobody else at rung 1 yet.
  trials[1].results.push_back({2, 0.75, 5, {}});
  trials[1].results.push_back({3, 0.8, 5, {}});
  trials[1].status = TrialStatus::kPaused;
  EXPECT_EQ(asha->next(c).resume, -1);
  // Six at rung 1: the top two may go on; trial 1 went already, so trial 5 is next.
  trials.push_back(trialWith(3, {0.1}));
  trials.push_back(trialWith(4, {0.2}));
  trials.push_back(trialWith(5, {0.65}));
  EXPECT_EQ(asha->next(c).resume, 5);
  // Minimizing turns the order round.
  Context minimize{trials, s, -1, true};
  EXPECT_EQ(asha->next(minimize).resume, 3);
  // A higher rung goes first: three at rung 3, the best is promoted to 9.
  for (int id : {3, 4}) {
    trials[static_cast<std::size_t>(id)].results.push_back({2, 0.3, 6, {}});
    trials[static_cast<std::size_t>(id)].results.push_back({3, 0.4, 6, {}});
  }
  EXPECT_EQ(asha->next(c).resume, 1);
}

TEST(TuneScheduler, AshaStopStopsBelowTheRungsQuantileOfEarlierResults) {
  const Space s = lrSpace();
  const auto asha = makeScheduler(options("asha-stop"), s);
  std::vector<Trial> trials = {trialWith(0, {0.5}, TrialStatus::kRunning)};
  Context c{trials, s, 1, true};
  EXPECT_EQ(asha->stopAt(c, trials[0]), 9);
  // The first at a rung always goes on.
  EXPECT_EQ(asha->onResult(c, trials[0], trials[0].results[0]), Verdict::kContinue);
  trials.push_back(trialWith(1, {0.9}, TrialStatus::kRunning));
  trials.push_back(trialWith(2, {0.6}, TrialStatus::kRunning));
  // Trial 2 (time 2.1) against trials 0 and 1 (0.5, 0.9): cutoff at the 66.7th percentile = 0.7667.
  EXPECT_EQ(asha->onResult(c, trials[2], trials[2].results[0]), Verdict::kStop);
  EXPECT_EQ(asha->onResult(c, trials[1], trials[1].results[0]),
            Verdict::kContinue);  // only trial 0 before it
  // Iteration 2 is no rung: nothing recorded, nothing decided.
  trials[2].results.push_back({2, 0.0, 9, {}});
  EXPECT_EQ(asha->onResult(c, trials[2], trials[2].results[1]), Verdict::kContinue);
}

TEST(TuneScheduler, HyperBandBracketsHalveSynchronously) {
  const Space s = lrSpace();
  const auto hb = makeScheduler(options("hyperband"), s);
  EXPECT_EQ(hb->describe(), "hyperband (eta 3; brackets 9 from 1 5 from 3 3 from 9)");
  std::vector<Trial> trials;
  Context c{trials, s, 1, true};
  for (int i = 0; i < 8; ++i) trials.push_back(trialWith(i, {0.1 * i}));
  // The first bracket (9 trials) is not full: nothing decided, new trials may start.
  Plan p = hb->next(c);
  EXPECT_EQ(p.resume, -1);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.allowNew);
  trials.push_back(trialWith(8, {0.05}, TrialStatus::kRunning));
  trials.back().results.clear();
  EXPECT_EQ(hb->stopAt(c, trials.back()), 1);
  p = hb->next(c);  // rung 1 waits for trial 8
  EXPECT_EQ(p.resume, -1);
  EXPECT_TRUE(p.stop.empty());
  trials.back() = trialWith(8, {0.05});
  p = hb->next(c);
  EXPECT_EQ(p.resume, 7);  // the top 3 of 9 (7, 6, 5) go on, the best first
  EXPECT_EQ(p.stop, (std::vector<int>{4, 3, 2, 1, 8, 0}));
  EXPECT_EQ(hb->stopAt(c, trials[7]), 3);
  // Trial 9 opens the second bracket, which starts at 3 iterations.
  Trial t9;
  t9.id = 9;
  EXPECT_EQ(hb->stopAt(c, t9), 3);
}

TEST(TuneScheduler, MedianStopsAWorseThanMedianTrialOnceEnoughOthersGotThere) {
  const Space s = lrSpace();
  SchedulerOptions o = options("median");
  o.gracePeriod = 2;
  const auto median = makeScheduler(o, s);
  std::vector<Trial> trials = {trialWith(0, {0.5, 0.6, 0.7}), trialWith(1, {0.4, 0.5, 0.6}),
                               trialWith(2, {0.1, 0.2}, TrialStatus::kRunning)};
  Context c{trials, s, 1, true};
  // Only two others: not enough (min samples 3).
  EXPECT_EQ(median->onResult(c, trials[2], trials[2].results[1]), Verdict::kContinue);
  trials.push_back(trialWith(3, {0.3, 0.4, 0.5}));
  // Means at 2: 0.55, 0.45, 0.35; median 0.45 > best 0.2.
  EXPECT_EQ(median->onResult(c, trials[2], trials[2].results[1]), Verdict::kStop);
  // Within the grace period nothing stops.
  EXPECT_EQ(median->onResult(c, trials[2], trials[2].results[0]), Verdict::kContinue);
  // Trial 0 at iteration 2 (best 0.6) is above the others' median.
  EXPECT_EQ(median->onResult(c, trials[0], trials[0].results[1]), Verdict::kContinue);
}

TEST(TuneScheduler, PbtExploitsATopTrialAndPerturbsItsConfiguration) {
  const Space s = lrSpace();
  SchedulerOptions o = options("pbt", 8);
  o.perturbationInterval = 2;
  o.seed = 11;
  o.resampleProbability = 0;
  const auto pbt = makeScheduler(o, s);
  std::vector<Trial> trials;
  for (int i = 0; i < 8; ++i) trials.push_back(trialWith(i, {0.1 * i, 0.1 * i}));
  Context c{trials, s, 1, true};
  EXPECT_EQ(pbt->stopAt(c, trials[0]), 4);
  EXPECT_EQ(pbt->stopAt(c, Trial{}), 2);
  // Bottom 2 of 8 (trials 0, 1) exploit one of the top 2 (6, 7); the rest just pause.
  for (int id = 0; id < 8; ++id) {
    const Decision d = pbt->onRunEnd(c, trials[static_cast<std::size_t>(id)]);
    EXPECT_EQ(d.verdict, Verdict::kPause);
    EXPECT_EQ(d.exploit.has_value(), id < 2) << id;
    if (!d.exploit) continue;
    const Trial& source = trials[static_cast<std::size_t>(d.exploit->source)];
    EXPECT_GE(d.exploit->source, 6);
    EXPECT_EQ(d.exploit->iteration, 2);
    const double ratio = d.exploit->config.at("lr").get<double>() / source.config.at("lr").get<double>();
    EXPECT_TRUE(std::abs(ratio - 0.8) < 1e-9 || std::abs(ratio - 1.2) < 1e-9) << ratio;
    // A choice moves to a neighbour of 64.
    const Json batch = d.exploit->config.at("batch");
    EXPECT_TRUE(batch == 32 || batch == 128) << batch;
    // The same draw again: a resumed experiment decides the same.
    EXPECT_EQ(pbt->onRunEnd(c, trials[static_cast<std::size_t>(id)]).exploit->config, d.exploit->config);
  }
  // Trials not started yet come first, then the least advanced paused trial.
  trials[3].results.pop_back();
  const Plan p = pbt->next(c);
  EXPECT_TRUE(p.newFirst);
  EXPECT_EQ(p.resume, 3);
}

}  // namespace
}  // namespace gyre::tune
