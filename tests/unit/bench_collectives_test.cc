// What the parent of `gyre bench collectives` derives around its ranks (bench/cli/bench_options.h,
// bench_report.h): each rank's command line, OpenMPI's time beside a row, and whether a sweep is
// whole, without starting any rank. Without the gyre tool (GYRE_BUILD_APPS, gyre_bench) this file
// has no tests.
#if __has_include("bench_options.h")
#include <gtest/gtest.h>

#include "bench_options.h"
#include "bench_report.h"

namespace gyre::app {
namespace {

TEST(BenchCollectives, RanksGetTheToolsArgumentsAndTheHiddenFlags) {
  EXPECT_EQ(rankArguments({"bench", "collectives", "--np", "2"}, 1, 2, "127.0.0.1:4000", 7),
            (std::vector<std::string>{"gyre", "bench", "collectives", "--np", "2", "--worker-rank", "1",
                                      "--worker-size", "2", "--worker-store", "127.0.0.1:4000",
                                      "--worker-result-fd", "7"}));
}

TEST(BenchCollectives, ASweepIsWholeWhenEveryRowCameAndEveryCheckPassed) {
  BenchOptions o;
  o.maxBytes = 64 << 10;  // 4 KiB, 16 KiB, 64 KiB
  EXPECT_EQ(sweepShortfall(o, 3, 0), "");
  EXPECT_EQ(sweepShortfall(o, 2, 0), "the ranks exited after 2 of 3 results");
  EXPECT_EQ(sweepShortfall(o, 3, 1), "1 of 3 checks FAILED (see the messages above)");
  o.algo = "all";  // every size with each of allreduce's 6 algorithms
  EXPECT_EQ(sweepShortfall(o, 3, 0), "the ranks exited after 3 of 18 results");
}

TEST(BenchCollectives, MpisTimeGoesBesideTheRowOfItsSize) {
  BenchRow row;
  row.bytes = 4096;
  addMpiTime(row, {{1024, 2.0}});
  EXPECT_FALSE(row.mpiTimeUs.has_value());
  addMpiTime(row, {{1024, 2.0}, {4096, 3.5}});
  ASSERT_TRUE(row.mpiTimeUs.has_value());
  EXPECT_DOUBLE_EQ(*row.mpiTimeUs, 3.5);
}

}  // namespace
}  // namespace gyre::app
#endif
