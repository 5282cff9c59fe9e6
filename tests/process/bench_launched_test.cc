// `gyre bench collectives` started the way a launcher starts it: one process per rank, with the
// GYRE_* variables set by hand and a TCP store served by the test. Rank 0 prints the table and
// the other ranks print nothing; the command line is checked against the job. Also checks that
// without launcher variables the command still starts its own ranks.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/auth.h"
#include "gyre/store.h"
#include "support/jobs.h"
#include "support/programs.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using test::ProgramRun;
using test::ProgramSpec;

constexpr auto kBenchTimeout = std::chrono::seconds(150);

// One data row of the human table.
struct TableRow {
  std::uint64_t bytes = 0;
  std::string algo;
  double timeUs = 0;
  std::string check;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<TableRow> tableRows(const std::string& text) {
  std::vector<TableRow> rows;
  for (const std::string& line : lines(text)) {
    if (line.empty() || line[0] == '#' || line.find("bytes") != std::string::npos) continue;
    std::istringstream in(line);
    TableRow row;
    std::uint64_t count = 0;
    double algbw = 0, busbw = 0;
    in >> row.bytes >> count >> row.algo >> row.timeUs >> algbw >> busbw >> row.check;
    EXPECT_FALSE(in.fail()) << "not a table row: '" << line << "'";
    rows.push_back(row);
  }
  return rows;
}

// `size` ranks of `gyre bench collectives ARGS`, each given the variables `gyre run` sets.
std::vector<ProgramSpec> launchedRanks(int size, const std::string& storeAddress, const std::string& secret,
                                       const std::vector<std::string>& args) {
  std::vector<ProgramSpec> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ProgramSpec spec;
    spec.argv = {test::gyreTool(), "bench", "collectives"};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.env = test::cleanEnvironment();
    spec.env["GYRE_RANK"] = std::to_string(rank);
    spec.env["GYRE_WORLD_SIZE"] = std::to_string(size);
    spec.env["GYRE_LOCAL_RANK"] = std::to_string(rank);
    spec.env["GYRE_LOCAL_SIZE"] = std::to_string(size);
    spec.env["GYRE_STORE_ADDR"] = storeAddress;
    spec.env["GYRE_SECRET"] = secret;
    spec.env["GYRE_JOB_ID"] = "bench-launched-test";
    spec.env["GYRE_START_TIMEOUT_MS"] = "60000";
    ranks.push_back(std::move(spec));
  }
  return ranks;
}

class BenchUnderALauncher : public ::testing::Test {
 protected:
  std::vector<ProgramRun> run(int size, const std::vector<std::string>& args) {
    return test::runPrograms(launchedRanks(size, server_->address(), secret_, args), kBenchTimeout);
  }

  const std::string secret_ = auth::generateSecret();
  const std::unique_ptr<TcpStoreServer> server_ = createTcpStoreServer(secret_);
};

TEST_F(BenchUnderALauncher, Rank0PrintsTheTableAndEveryCheckPasses) {
  const auto runs = run(3, {"--algo", "all", "--check", "--min-bytes", "4K", "--max-bytes", "64K", "--iters",
                            "3", "--warmup", "1", "--timeout", "120"});
  for (std::size_t rank = 0; rank < runs.size(); ++rank) {
    ASSERT_EQ(runs[rank].exitCode, 0) << "rank " << rank << " " << runs[rank].describe();
  }
  const auto header = lines(runs[0].out);
  ASSERT_FALSE(header.empty());
  EXPECT_NE(header[0].find("np=3 op=allreduce"), std::string::npos) << header[0];

  const std::vector<std::string> algorithms = {"auto", "naive",       "ring", "halving-doubling",
                                               "tree", "hierarchical"};
  const std::vector<std::uint64_t> sizes = {4096, 16384, 65536};
  const auto rows = tableRows(runs[0].out);
  ASSERT_EQ(rows.size(), sizes.size() * algorithms.size()) << runs[0].out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].bytes, sizes[i / algorithms.size()]) << "row " << i;
    EXPECT_EQ(rows[i].algo, algorithms[i % algorithms.size()]) << "row " << i;
    EXPECT_GT(rows[i].timeUs, 0) << "row " << i;
    EXPECT_EQ(rows[i].check, "ok") << "row " << i;
  }
  for (std::size_t rank = 1; rank < runs.size(); ++rank) {
    EXPECT_EQ(runs[rank].out, "") << "rank " << rank << " printed to stdout";
    EXPECT_EQ(runs[rank].err, "") << "rank " << rank << " printed to stderr";
  }
}

TEST_F(BenchUnderALauncher, JsonLinesOverTcp) {
  const auto runs = run(3, {"--op", "allgather", "--transport", "tcp", "--json", "--check", "--min-bytes",
                            "1K", "--max-bytes", "16K", "--iters", "3", "--warmup", "1", "--timeout", "120"});
  for (std::size_t rank = 0; rank < runs.size(); ++rank) {
    ASSERT_EQ(runs[rank].exitCode, 0) << "rank " << rank << " " << runs[rank].describe();
  }
  const auto rows = lines(runs[0].out);
  ASSERT_EQ(rows.size(), 3u) << runs[0].out;  // 1K, 4K, 16K
  for (const std::string& row : rows) {
    EXPECT_EQ(row.front(), '{') << row;
    for (const char* field : {R"("op":"allgather")", R"("np":3)", R"("transport":"tcp")", R"("check":"ok")"})
      EXPECT_NE(row.find(field), std::string::npos) << field << " missing in " << row;
  }
  for (std::size_t rank = 1; rank < runs.size(); ++rank) EXPECT_EQ(runs[rank].out, "") << "rank " << rank;
}

// A command line that does not fit the job fails on every rank before any rank connects, so one
// rank alone shows it.
TEST_F(BenchUnderALauncher, RefusesAnNpOtherThanTheJobSize) {
  auto ranks = launchedRanks(3, server_->address(), secret_, {"--np", "2"});
  const ProgramRun r = test::runProgram(ranks[1], kBenchTimeout);
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find("--np 2 does not match the 3 ranks that gyre started"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(BenchUnderALauncher, RefusesTheMpiBaseline) {
  auto ranks = launchedRanks(2, server_->address(), secret_, {"--baseline", "mpi"});
  const ProgramRun r = test::runProgram(ranks[0], kBenchTimeout);
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find("--baseline mpi is not available when gyre starts the ranks"), std::string::npos)
      << r.err;
}

TEST(BenchWithoutALauncher, StartsItsOwnRanks) {
  ProgramSpec spec;
  spec.argv = {test::gyreTool(), "bench", "collectives", "--np", "2",         "--check", "--max-bytes", "16K",
               "--iters",        "3",     "--warmup",    "1",    "--timeout", "120"};
  spec.env = test::cleanEnvironment();
  const ProgramRun r = test::runProgram(spec, kBenchTimeout);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("np=2 op=allreduce"), std::string::npos) << r.out;
  const auto rows = tableRows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;  // 4K, 16K
  for (const auto& row : rows) EXPECT_EQ(row.check, "ok");
}

#else

TEST(BenchUnderALauncher, NeedsTheGyreTool) {
  GTEST_SKIP() << "built without the gyre tool (GYRE_BUILD_APPS=OFF)";
}

#endif

}  // namespace
}  // namespace gyre
