// gyre programs under a real torchrun (Debian's python3-torch): gyre_init_check bootstraps from
// the variables torchrun sets, as docs/launching.md shows, with both of torchrun's rendezvous
// kinds. Skipped when torchrun is not installed.
#include <gtest/gtest.h>

#include "common/socket.h"
#include "info/info_system.h"
#include "support/jobs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using info::CommandOptions;
using info::CommandResult;
using info::runCommand;

// torchrun starts Python and imports torch before any worker runs; 60 s bounds the whole job.
constexpr std::chrono::milliseconds kJobTimeout{60000};

bool torchrunInstalled() {
  return runCommand({"sh", "-c", "command -v torchrun"}).ok();
}

bool portFree(std::uint16_t port) {
  try {
    net::listenOn("127.0.0.1", port);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A free port whose successor is free too (torchrun's agent store takes the first, gyre's the
// second).
std::uint16_t freePortPair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::uint16_t port = 0;
    {
      net::Fd probe = net::listenOn("127.0.0.1", 0);
      port = net::localPort(probe.get());
    }
    if (port < 65535 && portFree(port) && portFree(static_cast<std::uint16_t>(port + 1))) return port;
  }
  ADD_FAILURE() << "no pair of free ports found";
  return 0;
}

// Runs `torchrun ARGS... --no_python gyre_init_check` with none of the other launchers'
// variables in the way. `--redirects 1 --tee 1` (workers' stdout to a log file and to ours) works
// around torch 1.13 under Python 3.11 (Debian 12), whose torchrun fails parsing the default "0".
CommandResult runUnderTorchrun(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"torchrun"};
  argv.insert(argv.end(), args.begin(), args.end());
  const test::TempDir logs;  // torchrun's per-worker log files, removed afterwards
  argv.insert(argv.end(), {"--log_dir", logs.path(), "--redirects", "1", "--tee", "1", "--no_python",
                           test::binDir() + "/gyre_init_check"});
  CommandOptions options;
  options.timeout = kJobTimeout;
  options.setEnv = {{"GYRE_SECRET", "torchrun-process-test-secret"},
                    {"GYRE_START_TIMEOUT_MS", "30000"},
                    {"GYRE_TIMEOUT_MS", "30000"},
                    {"OMP_NUM_THREADS", "1"}};
  options.unsetEnv = {"GYRE_RANK",
                      "GYRE_WORLD_SIZE",
                      "GYRE_LOCAL_RANK",
                      "GYRE_LOCAL_SIZE",
                      "GYRE_STORE_ADDR",
                      "GYRE_HOST_STORE",
                      "GYRE_JOB_ID",
                      "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_SIZE",
                      "SLURM_PROCID",
                      "RANK",
                      "WORLD_SIZE",
                      "MASTER_ADDR",
                      "MASTER_PORT"};
  return runCommand(argv, options);
}

void expectBothRanksOk(const CommandResult& r, const std::string& store) {
  ASSERT_TRUE(r.ok()) << r.error << "\n" << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string line = "rank " + std::to_string(rank) + " of 2 ok (launcher torchrun, local rank " +
                             std::to_string(rank) + " of 2, store " + store;
    EXPECT_NE(r.output.find(line), std::string::npos) << "missing '" << line << "' in\n" << r.output;
  }
}

// --master_addr/--master_port: the static rendezvous. torchrun's agent serves its own store on
// MASTER_PORT and says so (TORCHELASTIC_USE_AGENT_STORE=True): gyre's store takes MASTER_PORT + 1.
TEST(Torchrun, StaticRendezvousStoreOnTheNextPort) {
  if (!torchrunInstalled())
    GTEST_SKIP() << "torchrun is not installed (Debian: apt-get install python3-torch)";
  const std::uint16_t port = freePortPair();
  ASSERT_NE(port, 0);
  const CommandResult r = runUnderTorchrun({"--nnodes", "1", "--nproc_per_node", "2", "--master_addr",
                                            "127.0.0.1", "--master_port", std::to_string(port)});
  expectBothRanksOk(r, "127.0.0.1:" + std::to_string(port + 1) + ")");
}

// --rdzv_backend c10d: the agents meet at the endpoint, then hand the workers a MASTER_ADDR and
// a fresh MASTER_PORT that nobody serves yet: gyre's store takes MASTER_PORT itself.
TEST(Torchrun, C10dRendezvous) {
  if (!torchrunInstalled())
    GTEST_SKIP() << "torchrun is not installed (Debian: apt-get install python3-torch)";
  const std::uint16_t port = freePortPair();
  ASSERT_NE(port, 0);
  const CommandResult r =
      runUnderTorchrun({"--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                        "127.0.0.1:" + std::to_string(port), "--rdzv_id", "gyre-test"});
  // The store is MASTER_ADDR (the agent's host name) and a port torchrun picked.
  expectBothRanksOk(r, "");
}

}  // namespace
}  // namespace gyre
