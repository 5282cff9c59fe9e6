// StragglerMonitor (src/train/stragglers.h): a rank slower than the others' median by the
// threshold in 8 of 10 steps is named, with its factor, within the window; noise and a single
// slow step are not; a rank that keeps pace again is cleared; with two ranks the slow one is
// named, not its partner.
#include "train/stragglers.h"

#include <gtest/gtest.h>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

TEST(StragglerMonitor, NamesARankTwiceAsSlowWithinTheWindowAndClearsItWhenItKeepsPace) {
  StragglerMonitor monitor(1.5);
  std::vector<std::string> named;
  std::int64_t step = 0;
  for (; step < 20 && named.empty(); ++step)
    named = monitor.observe(step + 1, {0.010, 0.020, 0.0101, 0.0099});
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(step, StragglerMonitor::kNamedAt);  // at the 8th slow step, well within 20
  EXPECT_EQ(
      named[0],
      "straggler: rank 1 is 2.0x as slow as the others (ready after 20.0 ms, they after 10.0 ms) in 8 of the "
      "last 8 steps, at step 8");
  ASSERT_EQ(monitor.current().size(), 1u);
  EXPECT_EQ(monitor.current()[0].rank, 1);
  EXPECT_EQ(monitor.current()[0].since, 8);
  EXPECT_NEAR(monitor.current()[0].factor, 2.0, 0.01);
  // It keeps pace again: cleared once at most 2 of the last 10 steps were slow.
  std::vector<std::string> cleared;
  int more = 0;
  for (; more < 20 && cleared.empty(); ++more)
    cleared = monitor.observe(100 + more, {0.010, 0.010, 0.010, 0.010});
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(more, 8);
  EXPECT_EQ(cleared[0], "straggler: rank 1 keeps pace again at step 107");
  EXPECT_TRUE(monitor.current().empty());
  // The epoch's record holds it once, then only the current ones (none).
  const std::vector<Straggler> seen = monitor.takeSeen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].rank, 1);
  EXPECT_TRUE(monitor.takeSeen().empty());
}

TEST(StragglerMonitor, NoiseAndOneSlowStepNameNobody) {
  StragglerMonitor monitor(1.5);
  for (int step = 1; step <= 100; ++step) {
    // Up to 30% apart, and now and then one rank 3x slower for a single step.
    const double wobble = 0.010 * (1 + 0.3 * ((step * 7) % 5) / 4.0);
    std::vector<double> times = {0.010, wobble, 0.011, 0.0105};
    if (step % 9 == 0) times[static_cast<std::size_t>(step % 4)] = 0.030;
    EXPECT_TRUE(monitor.observe(step, times).empty()) << "step " << step;
  }
  EXPECT_TRUE(monitor.takeSeen().empty());
}

TEST(StragglerMonitor, WithTwoRanksTheSlowOneIsNamedNotItsPartner) {
  StragglerMonitor monitor(1.5);
  std::vector<std::string> lines;
  for (int step = 1; step <= 10; ++step)
    for (const std::string& line : monitor.observe(step, {0.030, 0.015})) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("straggler: rank 0 is 2.0x"), std::string::npos) << lines[0];
  // A new world (an elastic membership) starts over.
  EXPECT_TRUE(monitor.observe(11, {0.030, 0.015, 0.015}).empty());
  EXPECT_TRUE(monitor.current().empty());
  EXPECT_THROW(StragglerMonitor(1.0), InvalidArgument);
}

}  // namespace
}  // namespace gyre::train

namespace gyre::train {
namespace {

// The times of 4 ranks with rank 2 twice as slow, as each step reports them: a rank that skipped
// the step reports only its short wait.
std::vector<double> timesWithSlowRank2(const BackupWorkers& backups) {
  std::vector<double> times = {0.010, 0.0102, 0.020, 0.0099};
  for (int r = 0; r < 4; ++r)
    if (backups.skips(r)) times[static_cast<std::size_t>(r)] = 0.0005;
  return times;
}

TEST(BackupWorkers, ASlowRankSkipsAfterTheFirstStepsAndComputesEveryTenthToBeMeasuredAgain) {
  BackupWorkers backups(1, 1.5, 4);
  std::vector<int> skippedAt;
  for (std::int64_t step = 1; step <= 40; ++step) {
    if (backups.skips(2)) skippedAt.push_back(static_cast<int>(step));
    for (int r : {0, 1, 3}) EXPECT_FALSE(backups.skips(r)) << "step " << step;
    backups.observe(timesWithSlowRank2(backups));
  }
  // Decided after step 10 for step 11; steps 20, 30 and 40 are its probes.
  std::vector<int> expected;
  for (int step = 11; step <= 40; ++step)
    if (step % 10 != 0) expected.push_back(step);
  EXPECT_EQ(skippedAt, expected);
  EXPECT_EQ(backups.takeDropped(), static_cast<std::int64_t>(expected.size()));
  EXPECT_EQ(backups.takeDropped(), 0);
  EXPECT_NEAR(backups.recent(2), 0.020, 1e-12);  // its skipped steps are not measurements
}

TEST(BackupWorkers, NobodySkipsWithoutAStragglerAndARankThatRecoversRejoins) {
  BackupWorkers backups(1, 1.5, 4);
  for (std::int64_t step = 1; step <= 30; ++step) {
    backups.observe({0.010, 0.013, 0.011, 0.0105});
    EXPECT_EQ(backups.skipping(), 0) << "step " << step;
  }
  for (std::int64_t step = 31; step <= 40; ++step) backups.observe(timesWithSlowRank2(backups));
  EXPECT_TRUE(backups.skips(2));
  // Rank 2 is fast again: its next probe measures it, and after kRecent probes it rejoins.
  int computedInARow = 0;
  for (std::int64_t step = 41; step <= 100 && computedInARow < 5; ++step) {
    std::vector<double> times = {0.010, 0.0102, 0.010, 0.0099};
    if (backups.skips(2)) {
      times[2] = 0.0005;
      computedInARow = 0;
    } else {
      ++computedInARow;
    }
    backups.observe(times);
  }
  EXPECT_EQ(computedInARow, 5);
  EXPECT_EQ(backups.skipping(), 0);
}

TEST(BackupWorkers, AtMostTheBackupsSkipAndBadCountsAreRefused) {
  BackupWorkers backups(2, 1.5, 5);
  for (int step = 1; step <= 12; ++step) backups.observe({0.010, 0.030, 0.025, 0.040, 0.010});
  // Three slow ranks, two backups: the two slowest skip.
  EXPECT_EQ(backups.skipping(), 2);
  EXPECT_TRUE(backups.skips(3));
  EXPECT_TRUE(backups.skips(1));
  EXPECT_THROW(BackupWorkers(4, 1.5, 4), InvalidArgument);
  EXPECT_THROW(BackupWorkers(0, 1.5, 4), InvalidArgument);
  EXPECT_THROW(BackupWorkers(1, 1.0, 4), InvalidArgument);
}

}  // namespace
}  // namespace gyre::train
