// gyre::rt across real processes started as a launcher starts them (the GYRE_* variables set by
// hand, a TCP store served by the test): tasks run in every process, an actor in another one; a
// process SIGKILLed with a call in flight fails that call (PeerLostError), its actor's calls
// (ActorDiedError) and later ones, while the others go on; an actor with a restart is rebuilt on
// a live process; tasks whose process dies run again elsewhere with the same results.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gyre/store.h"
#include "support/jobs.h"
#include "support/programs.h"

namespace gyre {
namespace {

TEST(RtProcess, KilledProcessesFailTheirCallsRestartTheirActorsAndRetryTheirTasks) {
  const std::string secret = "rt-process-test-secret";
  const auto server = createTcpStoreServer(secret);
  std::vector<test::ProgramSpec> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    test::ProgramSpec spec;
    spec.argv = {test::binDir() + "/gyre_rt_check"};
    spec.env = test::cleanEnvironment();
    spec.env["GYRE_RANK"] = std::to_string(rank);
    spec.env["GYRE_WORLD_SIZE"] = "4";
    spec.env["GYRE_LOCAL_RANK"] = std::to_string(rank);
    spec.env["GYRE_LOCAL_SIZE"] = "4";
    spec.env["GYRE_STORE_ADDR"] = server->address();
    spec.env["GYRE_SECRET"] = secret;
    spec.env["GYRE_JOB_ID"] = "rt-process-test";
    ranks.push_back(std::move(spec));
  }
  const std::vector<test::ProgramRun> runs = test::runPrograms(ranks, std::chrono::seconds(180));
  ASSERT_EQ(runs.size(), 4u);
  const test::ProgramRun& driver = runs[0];
  EXPECT_EQ(driver.exitCode, 0) << driver.describe() << "\n" << driver.out;
  for (const char* line : {"processes: 4 distinct of 4\n", "actor on rank 2: 60\n",
                           "task on the killed process: PeerLostError rank 2\n",
                           "its actor: ActorDiedError (gyre::rt: actor Counter#0.1 died with its process: "
                           "gyre::rt: process 2 (127.0.0.1:",
                           "a later task there: PeerLostError\n", "rank 1 still answers: 3\n", "actor on rank 3: 101\n",
                           "rebuilt after rank 3 died: 102, restarted yes\n", "squares retried: sum 140\n", "ok\n"})
    EXPECT_NE(driver.out.find(line), std::string::npos) << "missing: " << line << "\n" << driver.out;
  for (int rank = 1; rank < 4; ++rank) EXPECT_EQ(runs[static_cast<std::size_t>(rank)].signal, 9) << runs[static_cast<std::size_t>(rank)].describe();
}

}  // namespace
}  // namespace gyre
