// gyre::rt across real processes started as a launcher starts them (the GYRE_* variables set by
// hand, a TCP store served by the test): tasks run in every process, an actor in another one, and
// a process SIGKILLed with a call in flight fails that call (PeerLostError), its actor's calls
// (ActorDiedError) and later ones, while the others go on and end cleanly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gyre/store.h"
#include "support/programs.h"

namespace gyre {
namespace {

#ifdef GYRE_RT_CHECK

TEST(RtProcess, AKilledProcessFailsItsCallsAndTheOthersGoOn) {
  const std::string secret = "rt-process-test-secret";
  const auto server = createTcpStoreServer(secret);
  std::vector<test::ProgramSpec> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    test::ProgramSpec spec;
    spec.argv = {GYRE_RT_CHECK};
    spec.env = test::cleanEnvironment();
    spec.env["GYRE_RANK"] = std::to_string(rank);
    spec.env["GYRE_WORLD_SIZE"] = "3";
    spec.env["GYRE_LOCAL_RANK"] = std::to_string(rank);
    spec.env["GYRE_LOCAL_SIZE"] = "3";
    spec.env["GYRE_STORE_ADDR"] = server->address();
    spec.env["GYRE_SECRET"] = secret;
    spec.env["GYRE_JOB_ID"] = "rt-process-test";
    ranks.push_back(std::move(spec));
  }
  const std::vector<test::ProgramRun> runs = test::runPrograms(ranks, std::chrono::seconds(180));
  ASSERT_EQ(runs.size(), 3u);
  const test::ProgramRun& driver = runs[0];
  EXPECT_EQ(driver.exitCode, 0) << driver.describe() << "\n" << driver.out;
  for (const char* line : {"processes: 3 distinct of 3\n", "actor on rank 2: 60\n",
                           "task on the killed process: PeerLostError rank 2\n",
                           "its actor: ActorDiedError (gyre::rt: actor Counter#0.1 died with its process: "
                           "gyre::rt: process 2 (127.0.0.1:",
                           "a later task there: PeerLostError\n", "rank 1 still answers: 3\n", "ok\n"})
    EXPECT_NE(driver.out.find(line), std::string::npos) << "missing: " << line << "\n" << driver.out;
  EXPECT_EQ(runs[1].exitCode, 0) << runs[1].describe();
  EXPECT_EQ(runs[2].signal, 9) << runs[2].describe();
}

#endif  // GYRE_RT_CHECK

}  // namespace
}  // namespace gyre
