// Whole jobs under OpenMPI's mpirun: gyre_collective_check gives bit-identical results over the
// MPI transport, over TCP and over the default transport (shared memory here), and under
// `gyre run`, including on split() communicators used one at a time and at once, and in a
// program that initialized MPI itself below MPI_THREAD_MULTIPLE; the MPI transport bootstraps
// without MASTER_ADDR even when the ranks believe they are on different hosts; a killed rank
// makes the survivors fail with PeerLostError (or, without --enable-recovery, mpirun ends the
// job), never a hang. Every test skips itself when mpirun is not on PATH.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "common/socket.h"
#include "support/jobs.h"

namespace gyre {
namespace {

using namespace std::chrono_literals;

constexpr int kRanks = 3;

#define SKIP_WITHOUT_MPIRUN()             \
  if (test::findOnPath("mpirun").empty()) \
  GTEST_SKIP() << "mpirun is not on PATH (install openmpi-bin): the jobs under mpirun are skipped"

#define SKIP_WITHOUT_MPI_TRANSPORT() \
  if (!kHaveMpiTransport) GTEST_SKIP() << "this gyre was built without MPI (GYRE_WITH_MPI off)"

#ifdef GYRE_WITH_MPI
constexpr bool kHaveMpiTransport = true;
#else
constexpr bool kHaveMpiTransport = false;
#endif

std::string program(const std::string& name) {
  return test::binDir() + "/" + name;
}

test::Environment jobEnvironment(const std::map<std::string, std::string>& extra) {
  test::Environment env = test::cleanEnvironment();
  env["GYRE_TIMEOUT_MS"] = "60000";
  for (const auto& [name, value] : extra) env[name] = value;
  return env;
}

struct CheckJob {
  std::map<std::string, std::string> env;  // on top of a clean environment
  std::vector<std::string> wrapper = {};   // between mpirun and the program, e.g. `env NAME=VALUE`
  int np = kRanks;
  std::string program = "gyre_collective_check";
};

test::JobRun runCheck(const CheckJob& job) {
  const test::Environment env = jobEnvironment(job.env);
  std::vector<std::string> command = job.wrapper;
  command.push_back(program(job.program));
  return test::runJob(test::mpirunCommand(job.np, env, command), env, 300s);
}

void expectRankLines(const test::JobRun& job, const std::string& label, int np = kRanks) {
  ASSERT_TRUE(job.ok) << label << ": " << job.run.describe() << "\nstdout:\n" << job.run.out;
  ASSERT_EQ(job.rankLines.size(), static_cast<std::size_t>(np)) << label << ":\n" << job.run.out;
  for (int r = 0; r < np; ++r)  // sorted as text: fine below 10 ranks
    EXPECT_TRUE(
        job.rankLines[r].starts_with("rank " + std::to_string(r) + " of " + std::to_string(np) + ": "))
        << label << ": " << job.rankLines[r];
}

TEST(Mpirun, CollectivesGiveIdenticalResultsOverMpiTcpAndTheDefault) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  const test::JobRun overMpi = runCheck({{{"GYRE_TRANSPORT", "mpi"}}});
  const test::JobRun overTcp = runCheck({{{"GYRE_TRANSPORT", "tcp"}}});
  const test::JobRun byDefault = runCheck({});
  expectRankLines(overMpi, "GYRE_TRANSPORT=mpi");
  expectRankLines(overTcp, "GYRE_TRANSPORT=tcp");
  expectRankLines(byDefault, "GYRE_TRANSPORT unset");
  EXPECT_EQ(overMpi.rankLines, overTcp.rankLines);
  EXPECT_EQ(overMpi.rankLines, byDefault.rankLines);
  // The same program started by `gyre run` instead of mpirun.
  const test::Environment env = jobEnvironment({});
  const test::JobRun underGyreRun = test::runJob({program("gyre"), "run", "-np", std::to_string(kRanks),
                                                  "--no-tag-output", "--", program("gyre_collective_check")},
                                                 env, 300s);
  expectRankLines(underGyreRun, "gyre run");
  EXPECT_EQ(overMpi.rankLines, underGyreRun.rankLines);
}

// Each rank's OMPI_COMM_WORLD_LOCAL_* say it is alone on its host, as across real hosts: with
// the MPI transport rank 0 hosts the store on an external address and sends it over MPI.
TEST(Mpirun, TheMpiTransportNeedsNoMasterAddrAcrossHosts) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  if (net::externalAddresses().empty())
    GTEST_SKIP() << "this host has no external address to host a store on";
  const std::vector<std::string> alone = {"env", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE=1"};
  const test::JobRun overMpi = runCheck({{{"GYRE_TRANSPORT", "mpi"}, {"GYRE_LOG_LEVEL", "info"}}, alone});
  expectRankLines(overMpi, "GYRE_TRANSPORT=mpi, one rank per host");
  EXPECT_NE(overMpi.run.err.find("(from rank 0 over MPI)"), std::string::npos) << overMpi.run.err;
  EXPECT_EQ(overMpi.run.err.find("GYRE_SECRET is not set"), std::string::npos) << overMpi.run.err;
  // The same job over TCP has no store to meet in, and says what to set.
  const test::JobRun overTcp = runCheck({{{"GYRE_TRANSPORT", "tcp"}}, alone});
  EXPECT_NE(overTcp.run.exitCode, 0) << overTcp.run.describe();
  EXPECT_FALSE(overTcp.run.timedOut);
  EXPECT_NE(overTcp.run.err.find("MASTER_ADDR"), std::string::npos) << overTcp.run.err;
  // And the results are those of a single-host job.
  const test::JobRun together = runCheck({{{"GYRE_TRANSPORT", "mpi"}}});
  expectRankLines(together, "GYRE_TRANSPORT=mpi, one host");
  EXPECT_EQ(overMpi.rankLines, together.rankLines);
}

// Four ranks split into two communicators of two, each with an MPI communicator of its own,
// made at the same time and used one at a time and both at once.
TEST(Mpirun, SplitCommunicatorsOverMpi) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  const test::JobRun overMpi = runCheck({{{"GYRE_TRANSPORT", "mpi"}}, {}, 4});
  const test::JobRun overShm = runCheck({{{"GYRE_TRANSPORT", "shm"}}, {}, 4});
  expectRankLines(overMpi, "GYRE_TRANSPORT=mpi, 4 ranks", 4);
  expectRankLines(overShm, "GYRE_TRANSPORT=shm, 4 ranks", 4);
  EXPECT_EQ(overMpi.rankLines, overShm.rankLines);
}

// The program initializes MPI itself at MPI_THREAD_SERIALIZED: gyre uses that MPI, serializes
// its own calls (two communicators' worker threads call MPI at once), and leaves finalizing to
// the program.
TEST(Mpirun, AProgramThatInitializedMpiItselfBelowThreadMultiple) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  const test::JobRun own = runCheck({{{"GYRE_TRANSPORT", "mpi"}, {"GYRE_LOG_LEVEL", "info"}},
                                     {},
                                     kRanks,
                                     "gyre_collective_check_user_mpi"});
  expectRankLines(own, "MPI initialized by the program");
  EXPECT_NE(own.run.err.find("initialized by the program"), std::string::npos) << own.run.err;
  EXPECT_NE(own.run.err.find("gyre serializes its MPI calls"), std::string::npos) << own.run.err;
  const test::JobRun gyres = runCheck({{{"GYRE_TRANSPORT", "mpi"}}});
  expectRankLines(gyres, "MPI initialized by gyre");
  EXPECT_EQ(own.rankLines, gyres.rankLines);
}

// The survivors' lines "rank R: lost rank L at T: ..." as {R: L}, and the victim's kill time.
struct LossReport {
  std::map<int, int> lost;
  std::map<int, long long> at;
  long long killedAt = -1;
};

LossReport parseLoss(const std::string& out) {
  LossReport report;
  // sscanf rather than std::regex: GCC 12 warns inside <regex> at -O1 (the ASan build).
  for (const std::string& line : test::rankLines(out)) {
    int rank = 0, lostRank = 0;
    long long at = 0;
    if (std::sscanf(line.c_str(), "rank %d: lost rank %d at %lld:", &rank, &lostRank, &at) == 3) {
      report.lost[rank] = lostRank;
      report.at[rank] = at;
    } else if (std::sscanf(line.c_str(), "rank %d: killed at %lld", &rank, &at) == 2) {
      report.killedAt = at;
    }
  }
  return report;
}

// With --enable-recovery mpirun lets the survivors run on: each fails fast with PeerLostError
// naming the killed rank, seen through gyre's control connections (MPI has no word for it).
TEST(Mpirun, AKilledRankMakesTheOthersFailWithPeerLostErrorOverMpi) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  constexpr int kVictim = 1;
  const test::Environment env = jobEnvironment({{"GYRE_TRANSPORT", "mpi"}});
  const test::JobRun job = test::runJob(
      test::mpirunCommand(kRanks, env, {program("gyre_peer_loss_check"), std::to_string(kVictim)},
                          {"--enable-recovery"}),
      env, 120s);
  ASSERT_FALSE(job.run.timedOut) << job.run.describe() << "\nstdout:\n" << job.run.out;
  const LossReport report = parseLoss(job.run.out);
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    ASSERT_EQ(report.lost.count(r), 1u) << "rank " << r << " reported no loss\n"
                                        << job.run.out << "\n"
                                        << job.run.err;
    EXPECT_EQ(report.lost.at(r), kVictim) << job.run.out;
    if (report.killedAt > 0) {
      const double seconds = static_cast<double>(report.at.at(r) - report.killedAt) / 1e9;
      EXPECT_LT(seconds, 2.0) << "rank " << r << " noticed after " << seconds << " s";
    }
  }
}

// Without it, mpirun itself ends the job when a rank dies: it must end, and fail.
TEST(Mpirun, AKilledRankEndsTheJobWithoutRecovery) {
  SKIP_WITHOUT_MPIRUN();
  SKIP_WITHOUT_MPI_TRANSPORT();
  const test::Environment env = jobEnvironment({{"GYRE_TRANSPORT", "mpi"}});
  const auto start = std::chrono::steady_clock::now();
  const test::JobRun job =
      test::runJob(test::mpirunCommand(kRanks, env, {program("gyre_peer_loss_check"), "2"}), env, 120s);
  EXPECT_FALSE(job.run.timedOut) << job.run.describe();
  EXPECT_NE(job.run.exitCode, 0) << job.run.describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
}

}  // namespace
}  // namespace gyre
