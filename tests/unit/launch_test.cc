// detectLaunch for each launcher's variables, their precedence, malformed values, and Slurm's
// compressed lists.
#include <gtest/gtest.h>
#include <unistd.h>

#include "api/launch_env.h"
#include "api/options_env.h"
#include "gyre/errors.h"
#include "gyre/init.h"

namespace gyre {
namespace {

using Env = std::map<std::string, std::string>;

TEST(Launch, NoLauncherIsAWorldOfOne) {
  const LaunchInfo info = detectLaunch({{"HOME", "/root"}, {"PATH", "/bin"}});
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.localRank, 0);
  EXPECT_EQ(info.localSize, 1);
  EXPECT_EQ(info.storeAddress, "");
  EXPECT_FALSE(info.hostStore);
  EXPECT_EQ(info.secret, "");
}

TEST(Launch, GyreVariables) {
  const LaunchInfo info = detectLaunch({{"GYRE_RANK", "3"},
                                        {"GYRE_WORLD_SIZE", "8"},
                                        {"GYRE_LOCAL_RANK", "1"},
                                        {"GYRE_LOCAL_SIZE", "2"},
                                        {"GYRE_STORE_ADDR", "10.0.0.1:4000"},
                                        {"GYRE_SECRET", "abc"},
                                        {"GYRE_JOB_ID", "job42"}});
  EXPECT_EQ(info.launcher, "gyre");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localSize, 2);
  EXPECT_EQ(info.storeAddress, "10.0.0.1:4000");
  EXPECT_FALSE(info.hostStore);  // `gyre run` hosts it
  EXPECT_EQ(info.secret, "abc");
  EXPECT_EQ(info.jobId, "job42");
}

TEST(Launch, GyreHostStoreOverride) {
  Env env{{"GYRE_RANK", "0"},
          {"GYRE_WORLD_SIZE", "2"},
          {"GYRE_STORE_ADDR", "[::1]:4000"},
          {"GYRE_SECRET", "s"},
          {"GYRE_HOST_STORE", "1"}};
  EXPECT_TRUE(detectLaunch(env).hostStore);
  env["GYRE_STORE_ADDR"] = "file:/tmp/x";
  EXPECT_THROW(detectLaunch(env), InvalidArgument);
}

TEST(Launch, GyreNeedsAStoreAndASecretForMoreThanOneRank) {
  EXPECT_THROW(detectLaunch({{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "2"}, {"GYRE_SECRET", "s"}}),
               InvalidArgument);
  try {
    detectLaunch({{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "2"}, {"GYRE_STORE_ADDR", "h:1"}});
    ADD_FAILURE() << "no secret accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("GYRE_SECRET"), std::string::npos) << e.what();
  }
  EXPECT_EQ(detectLaunch({{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "1"}}).size, 1);
}

TEST(Launch, OpenMpiOnOneHostUsesAFileStore) {
  const LaunchInfo info = detectLaunch({{"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                        {"OMPI_MCA_ess_base_jobid", "1984036865"}});
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.localSize, 4);
  EXPECT_EQ(info.jobId, "1984036865");
  EXPECT_EQ(info.storeAddress, "file:/tmp/gyre-" + std::to_string(getuid()) + "-1984036865.store");
  EXPECT_FALSE(info.hostStore);
  EXPECT_EQ(info.secret.size(), 64u);  // derived from the job id
}

TEST(Launch, OpenMpiJobIdFromPmixNamespace) {
  const LaunchInfo info = detectLaunch({{"OMPI_COMM_WORLD_RANK", "0"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"PMIX_NAMESPACE", "prterun-host-123@1"}});
  EXPECT_EQ(info.storeAddress, "file:/tmp/gyre-" + std::to_string(getuid()) + "-prterun-host-123_1.store");
}

TEST(Launch, OpenMpiAcrossHostsNeedsMasterAddr) {
  Env env{{"OMPI_COMM_WORLD_RANK", "0"},
          {"OMPI_COMM_WORLD_SIZE", "4"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
          {"OMPI_MCA_ess_base_jobid", "7"}};
  try {
    detectLaunch(env);
    ADD_FAILURE() << "multi-host mpirun without a store accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
  env["MASTER_ADDR"] = "node1";
  env["MASTER_PORT"] = "29500";
  LaunchInfo info = detectLaunch(env);
  EXPECT_EQ(info.storeAddress, "node1:29500");
  EXPECT_TRUE(info.hostStore);  // rank 0
  env["OMPI_COMM_WORLD_RANK"] = "2";
  EXPECT_FALSE(detectLaunch(env).hostStore);
}

TEST(Launch, SlurmVariables) {
  const LaunchInfo info = detectLaunch({{"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_LOCALID", "1"},
                                        {"SLURM_NODEID", "2"},
                                        {"SLURM_STEP_TASKS_PER_NODE", "2(x3),2"},
                                        {"SLURM_STEP_NODELIST", "gpu[07-10]"},
                                        {"SLURM_JOB_NODELIST", "other1"},
                                        {"SLURM_JOB_ID", "12345"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"MASTER_PORT", "29400"}});
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localSize, 2);
  EXPECT_EQ(info.storeAddress, "gpu07:29400");
  EXPECT_FALSE(info.hostStore);
  EXPECT_EQ(info.jobId, "12345.0");
}

TEST(Launch, SlurmDerivesThePortFromTheJobAndRankZeroHosts) {
  Env env{{"SLURM_PROCID", "0"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_NTASKS_PER_NODE", "4"},
          {"SLURM_JOB_NODELIST", "node[01-04,07]"},
          {"SLURM_JOB_ID", "999"}};
  const LaunchInfo a = detectLaunch(env);
  EXPECT_EQ(a.localSize, 4);
  EXPECT_TRUE(a.hostStore);
  const auto colon = a.storeAddress.rfind(':');
  EXPECT_EQ(a.storeAddress.substr(0, colon), "node01");
  const int port = std::stoi(a.storeAddress.substr(colon + 1));
  EXPECT_GE(port, 10000);
  EXPECT_LT(port, 32000);
  env["SLURM_PROCID"] = "3";
  const LaunchInfo b = detectLaunch(env);
  EXPECT_EQ(b.storeAddress, a.storeAddress);  // every rank agrees without talking
  EXPECT_FALSE(b.hostStore);
  EXPECT_EQ(b.secret, a.secret);
  env["SLURM_JOB_ID"] = "1000";
  EXPECT_NE(detectLaunch(env).secret, a.secret);
}

TEST(Launch, TorchrunVariables) {
  Env env{{"RANK", "0"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_RANK", "0"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "10.1.2.3"},
          {"MASTER_PORT", "29500"}};
  LaunchInfo info = detectLaunch(env);
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.localSize, 2);
  EXPECT_EQ(info.storeAddress, "10.1.2.3:29500");
  EXPECT_TRUE(info.hostStore);
  EXPECT_FALSE(info.secret.empty());
  // torchrun's agent already serves its own store on MASTER_PORT.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_EQ(detectLaunch(env).storeAddress, "10.1.2.3:29501");
  env["RANK"] = "1";
  EXPECT_FALSE(detectLaunch(env).hostStore);
  env.erase("MASTER_ADDR");
  EXPECT_THROW(detectLaunch(env), InvalidArgument);
}

TEST(Launch, AWorldOfOneNeedsNoStore) {
  for (const Env& env : {Env{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
                         Env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}},
                         Env{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}}) {
    const LaunchInfo info = detectLaunch(env);
    EXPECT_EQ(info.size, 1) << info.launcher;
    EXPECT_EQ(info.storeAddress, "") << info.launcher;
    EXPECT_FALSE(info.hostStore) << info.launcher;
  }
}

TEST(Launch, PrecedenceGyreThenOpenMpiThenSlurmThenTorchrun) {
  Env env{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}};
  EXPECT_EQ(detectLaunch(env).launcher, "torchrun");
  env.insert(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "n1"}});
  EXPECT_EQ(detectLaunch(env).launcher, "slurm");
  env.insert({{"OMPI_COMM_WORLD_RANK", "1"},
              {"OMPI_COMM_WORLD_SIZE", "2"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
              {"OMPI_MCA_ess_base_jobid", "3"}});
  EXPECT_EQ(detectLaunch(env).launcher, "mpirun");
  env.insert(
      {{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "3"}, {"GYRE_STORE_ADDR", "s:2"}, {"GYRE_SECRET", "x"}});
  const LaunchInfo info = detectLaunch(env);
  EXPECT_EQ(info.launcher, "gyre");
  EXPECT_EQ(info.size, 3);
  EXPECT_EQ(info.storeAddress, "s:2");
}

// torchrun's workers inside an srun (or mpirun) step inherit SLURM_PROCID and the like; torchrun's
// agent, the innermost launcher, decides.
TEST(Launch, TorchrunInsideSrunIsTorchrun) {
  Env env{{"RANK", "3"},          {"WORLD_SIZE", "4"},          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"},  {"MASTER_PORT", "29500"},
          {"SLURM_PROCID", "1"},     {"SLURM_NTASKS", "2"},        {"SLURM_JOB_ID", "5"},
          {"SLURM_JOB_NODELIST", "n[1-2]"}};
  EXPECT_EQ(detectLaunch(env).launcher, "slurm");  // plain RANK may be a stale variable
  env["TORCHELASTIC_RUN_ID"] = "job5";
  const LaunchInfo info = detectLaunch(env);
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.jobId, "job5");
  env.insert({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(detectLaunch(env).launcher, "torchrun");
}

TEST(Launch, GyreOverridesApplyUnderOtherLaunchers) {
  const LaunchInfo info = detectLaunch({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "a"},
                                        {"MASTER_PORT", "1"},
                                        {"GYRE_STORE_ADDR", "b:7"},
                                        {"GYRE_SECRET", "mine"},
                                        {"GYRE_JOB_ID", "j"}});
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.storeAddress, "b:7");
  EXPECT_TRUE(info.hostStore);
  EXPECT_EQ(info.secret, "mine");
  EXPECT_EQ(info.jobId, "j");
}

TEST(Launch, MalformedValuesNameTheVariable) {
  const std::vector<std::pair<Env, std::string>> cases = {
      {{{"GYRE_RANK", "x"}, {"GYRE_WORLD_SIZE", "2"}}, "GYRE_RANK"},
      {{{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "0"}}, "GYRE_WORLD_SIZE"},
      {{{"GYRE_RANK", "2"}, {"GYRE_WORLD_SIZE", "2"}, {"GYRE_STORE_ADDR", "h:1"}, {"GYRE_SECRET", "s"}},
       "GYRE_RANK=2 is not below GYRE_WORLD_SIZE=2 (gyre)"},
      {{{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "2"}, {"GYRE_LOCAL_RANK", "3"}, {"GYRE_LOCAL_SIZE", "2"}},
       "GYRE_LOCAL_RANK=3 is not below GYRE_LOCAL_SIZE=2 (gyre)"},
      {{{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "2"}, {"GYRE_LOCAL_SIZE", "3"}},
       "GYRE_LOCAL_SIZE=3 exceeds GYRE_WORLD_SIZE=2 (gyre)"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "5"}},
       "RANK=2 is not below WORLD_SIZE=2 (torchrun)"},
      {{{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"GYRE_STORE_ADDR", "h:1"}},
       "OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4 (mpirun)"},
      {{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}, {"GYRE_STORE_ADDR", "h:1"}},
       "SLURM_PROCID=3 is not below SLURM_NTASKS=2 (slurm)"},
      {{{"SLURM_PROCID", "3"}, {"SLURM_NPROCS", "2"}, {"GYRE_STORE_ADDR", "h:1"}},
       "SLURM_PROCID=3 is not below SLURM_NPROCS=2 (slurm)"},
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_LOCALID", "2"},
        {"SLURM_NTASKS_PER_NODE", "2"},
        {"GYRE_STORE_ADDR", "h:1"}},
       "SLURM_LOCALID=2 is not below SLURM_NTASKS_PER_NODE[SLURM_NODEID]=2 (slurm)"},
      {{{"GYRE_RANK", "0"},
        {"GYRE_WORLD_SIZE", "2"},
        {"GYRE_STORE_ADDR", "nohostport"},
        {"GYRE_SECRET", "s"}},
       "GYRE_STORE_ADDR"},
      {{{"GYRE_RANK", "0"}}, "GYRE_WORLD_SIZE"},
      {{{"GYRE_RANK", "0"}, {"GYRE_WORLD_SIZE", "1"}, {"GYRE_HOST_STORE", "maybe"}}, "GYRE_HOST_STORE"},
      {{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK"},
      {{{"OMPI_COMM_WORLD_RANK", "0"}}, "OMPI_COMM_WORLD_SIZE"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}}, "SLURM_NTASKS"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NTASKS_PER_NODE", "2(x"}},
       "SLURM_NTASKS_PER_NODE"},
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_JOB_ID", "1"},
        {"SLURM_JOB_NODELIST", "n[3-1]"}},
       "SLURM_JOB_NODELIST"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT"},
      {{{"RANK", "1"}}, "WORLD_SIZE"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "2"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "a"},
        {"MASTER_PORT", "5"}},
       "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2 (torchrun)"},
  };
  for (const auto& [env, needle] : cases) {
    try {
      detectLaunch(env);
      ADD_FAILURE() << "accepted a malformed environment; expected an error naming " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

TEST(SlurmLists, NodelistExpansion) {
  using launch::expandNodelist;
  EXPECT_EQ(expandNodelist("node1", "V"), std::vector<std::string>{"node1"});
  EXPECT_EQ(expandNodelist("node[01-04,07]", "V"),
            (std::vector<std::string>{"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expandNodelist("a[8-10],b,c[1]", "V"), (std::vector<std::string>{"a8", "a9", "a10", "b", "c1"}));
  EXPECT_EQ(expandNodelist("r[1-2]n[01-02]-ib", "V"),
            (std::vector<std::string>{"r1n01-ib", "r1n02-ib", "r2n01-ib", "r2n02-ib"}));
  EXPECT_EQ(expandNodelist("gpu[098-101]", "V"),
            (std::vector<std::string>{"gpu098", "gpu099", "gpu100", "gpu101"}));
  for (const char* bad :
       {"", "a,,b", "n[1-2", "n1-2]", "n[]", "n[a-b]", "n[5-3]", "n[1-2-3]", "n[0-99999999]"})
    EXPECT_THROW(expandNodelist(bad, "V"), InvalidArgument) << bad;
}

TEST(SlurmLists, TasksPerNodeExpansion) {
  using launch::expandTasksPerNode;
  EXPECT_EQ(expandTasksPerNode("4", "V"), std::vector<int>{4});
  EXPECT_EQ(expandTasksPerNode("2(x3),1", "V"), (std::vector<int>{2, 2, 2, 1}));
  for (const char* bad : {"", "0", "x", "2(x)", "2(3)", "2(x0)", "2(x3", "1,,2", "2(x99999999)"})
    EXPECT_THROW(expandTasksPerNode(bad, "V"), InvalidArgument) << bad;
}

TEST(LaunchHelpers, DerivedPortsAndFileNamesAreStableAndSafe) {
  EXPECT_EQ(launch::derivePort("12345.0"), launch::derivePort("12345.0"));
  EXPECT_NE(launch::derivePort("12345.0"), launch::derivePort("12346.0"));
  EXPECT_EQ(launch::sanitizeForFileName("a/b c@1.x-y_z"), "a_b_c_1.x-y_z");
  EXPECT_EQ(launch::deriveSecret("x").size(), 64u);
  EXPECT_NE(launch::deriveSecret("x"), launch::deriveSecret("y"));
}

TEST(LaunchKnobs, ApplyOnlyTheKnobsThatAreSet) {
  CommunicatorOptions options;
  options.timeout = std::chrono::milliseconds(1234);
  options.interface = "lo";
  applyKnobs({}, options);
  EXPECT_EQ(options.timeout, std::chrono::milliseconds(1234));
  EXPECT_EQ(options.interface, "lo");
  // GYRE_START_TIMEOUT_MS's documented default, whatever the launcher, unless the caller chose one.
  EXPECT_EQ(options.startTimeout, std::chrono::milliseconds(30000));
  options.startTimeout = std::chrono::milliseconds(700);
  applyKnobs({}, options);
  EXPECT_EQ(options.startTimeout, std::chrono::milliseconds(700));
  applyKnobs({{"GYRE_TIMEOUT_MS", "2500"},
              {"GYRE_TRANSPORT", "tcp"},
              {"GYRE_IFACE", "eth0"},
              {"GYRE_DEBUG_COLLECTIVES", "1"},
              {"GYRE_SPIN_US", "0"},
              {"GYRE_SHM_RING_BYTES", "65536"},
              {"GYRE_COST_MODEL", "3,10,20"}},
             options);
  EXPECT_EQ(options.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(options.transport, Transport::kTcp);
  EXPECT_EQ(options.interface, "eth0");
  EXPECT_TRUE(options.debugCollectives);
  EXPECT_EQ(options.spinMicros, 0);
  EXPECT_EQ(options.shmRingBytes, 65536u);
  EXPECT_EQ(options.costModel, "3,10,20");
  try {
    applyKnobs({{"GYRE_TRANSPORT", "carrier-pigeon"}}, options);
    ADD_FAILURE() << "bad transport accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("GYRE_TRANSPORT"), std::string::npos) << e.what();
  }
  EXPECT_THROW(applyKnobs({{"GYRE_COST_MODEL", "fast"}}, options), InvalidArgument);
}

TEST(Launch, ProcessEnvironmentReadsTheRealEnvironment) {
  ::setenv("GYRE_LAUNCH_TEST_MARKER", "a=b", 1);
  const auto env = processEnvironment();
  ::unsetenv("GYRE_LAUNCH_TEST_MARKER");
  ASSERT_EQ(env.count("GYRE_LAUNCH_TEST_MARKER"), 1u);
  EXPECT_EQ(env.at("GYRE_LAUNCH_TEST_MARKER"), "a=b");
}

}  // namespace
}  // namespace gyre
