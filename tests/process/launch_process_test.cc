// gyre::init() end to end: real processes given the variables each launcher sets find each
// other through the store that launcher implies, and run a collective.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/auth.h"
#include "common/socket.h"
#include "gyre/init.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using Env = std::map<std::string, std::string>;

constexpr int kLaunchRanks = 3;

std::uint16_t freePort() {
  net::Fd probe = net::listenOn("127.0.0.1", 0);
  return net::localPort(probe.get());
}

// In a child: replaces every launcher variable with `env`, runs init() and an allreduce.
void initAndReduce(int rank, const Env& env) {
  for (const char* name : {"GYRE_RANK",
                           "GYRE_WORLD_SIZE",
                           "GYRE_LOCAL_RANK",
                           "GYRE_LOCAL_SIZE",
                           "GYRE_STORE_ADDR",
                           "GYRE_SECRET",
                           "GYRE_JOB_ID",
                           "GYRE_HOST_STORE",
                           "GYRE_TRANSPORT",
                           "GYRE_IFACE",
                           "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "SLURM_PROCID",
                           "SLURM_NTASKS",
                           "RANK",
                           "WORLD_SIZE",
                           "MASTER_ADDR",
                           "MASTER_PORT",
                           "TORCHELASTIC_USE_AGENT_STORE"})
    ::unsetenv(name);
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  ::setenv("GYRE_TIMEOUT_MS", "30000", 1);
  auto world = init();
  ASSERT_NE(world, nullptr);
  EXPECT_EQ(world->rank(), rank);
  EXPECT_EQ(world->size(), kLaunchRanks);
  float value = static_cast<float>(rank + 1);
  world->allreduce(&value, &value, 1);
  EXPECT_EQ(value, kLaunchRanks * (kLaunchRanks + 1) / 2.0f);
  world->barrier();
}

TEST(LaunchProcesses, InitWithTorchrunVariables) {
  const std::string port = std::to_string(freePort());
  const std::string secret = auth::generateSecret();
  test::runProcesses(
      kLaunchRanks,
      [&](int rank) {
        initAndReduce(rank, {{"RANK", std::to_string(rank)},
                             {"WORLD_SIZE", std::to_string(kLaunchRanks)},
                             {"LOCAL_RANK", std::to_string(rank)},
                             {"LOCAL_WORLD_SIZE", std::to_string(kLaunchRanks)},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", port},
                             {"GYRE_SECRET", secret}});
      },
      std::chrono::seconds(120));
}

TEST(LaunchProcesses, InitWithSlurmVariables) {
  const std::string port = std::to_string(freePort());
  const std::string jobId = std::to_string(getpid());  // the same in every rank
  test::runProcesses(
      kLaunchRanks,
      [&](int rank) {
        initAndReduce(rank, {{"SLURM_PROCID", std::to_string(rank)},
                             {"SLURM_NTASKS", std::to_string(kLaunchRanks)},
                             {"SLURM_LOCALID", std::to_string(rank)},
                             {"SLURM_NODEID", "0"},
                             {"SLURM_STEP_TASKS_PER_NODE", std::to_string(kLaunchRanks)},
                             {"SLURM_STEP_NODELIST", "localhost"},
                             {"SLURM_JOB_ID", jobId},
                             {"MASTER_PORT", port}});  // no GYRE_SECRET: derived from the job id
      },
      std::chrono::seconds(120));
}

TEST(LaunchProcesses, InitWithSingleHostOpenMpiVariablesUsesAFileStore) {
  const std::string jobId = "gyre-test-" + std::to_string(getpid());
  const std::string path = "/tmp/gyre-" + std::to_string(getuid()) + "-" + jobId + ".store";
  std::filesystem::remove(path);
  test::runProcesses(
      kLaunchRanks,
      [&](int rank) {
        initAndReduce(rank, {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                             {"OMPI_COMM_WORLD_SIZE", std::to_string(kLaunchRanks)},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                             {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(kLaunchRanks)},
                             {"OMPI_MCA_ess_base_jobid", jobId},
                             {"OMPI_MCA_orte_precondition_transports", "0123456789abcdef-fedcba9876543210"}});
      },
      std::chrono::seconds(120));
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

TEST(LaunchProcesses, InitWithGyreVariablesAndAFileStore) {
  test::TempDir dir;
  const std::string secret = auth::generateSecret();
  test::runProcesses(
      kLaunchRanks,
      [&](int rank) {
        initAndReduce(rank, {{"GYRE_RANK", std::to_string(rank)},
                             {"GYRE_WORLD_SIZE", std::to_string(kLaunchRanks)},
                             {"GYRE_LOCAL_RANK", std::to_string(rank)},
                             {"GYRE_LOCAL_SIZE", std::to_string(kLaunchRanks)},
                             {"GYRE_STORE_ADDR", "file:" + dir.path() + "/job.store"},
                             {"GYRE_SECRET", secret},
                             {"GYRE_TRANSPORT", "tcp"}});
      },
      std::chrono::seconds(120));
}

}  // namespace
}  // namespace gyre
