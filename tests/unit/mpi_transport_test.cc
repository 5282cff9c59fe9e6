// The MPI transport's name, knob and bootstrap decisions, and what a build without MPI says.
// Moving bytes over MPI needs one process per rank under mpirun: tests/mpi/ does that.
#include <gtest/gtest.h>

#include <string>

#include "api/options_env.h"
#include "gyre/gyre.h"

namespace gyre {
namespace {

using Env = std::map<std::string, std::string>;

TEST(MpiTransport, NameParsesPrintsAndIsAKnobChoice) {
  EXPECT_EQ(parseTransport("mpi"), Transport::kMpi);
  EXPECT_EQ(parseTransport("MPI"), Transport::kMpi);
  EXPECT_EQ(toString(Transport::kMpi), "mpi");
  CommunicatorOptions options;
  applyKnobs({{"GYRE_TRANSPORT", "Mpi"}}, options);
  EXPECT_EQ(options.transport, Transport::kMpi);
  try {
    parseTransport("infiniband");
    ADD_FAILURE() << "an unknown transport was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("mpi"), std::string::npos) << e.what();  // listed as a choice
  }
}

Env openMpi(int rank, int size, int localSize) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(localSize)},
          {"OMPI_MCA_ess_base_jobid", "7"},
          {"GYRE_TRANSPORT", "mpi"}};
}

TEST(MpiTransport, UnderMpirunTheStoreAddressAndSecretComeOverMpi) {
  for (int localSize : {1, 4}) {  // across hosts (no MASTER_ADDR needed) and on one host
    LaunchInfo info = detectLaunch(openMpi(0, 4, localSize));
    EXPECT_TRUE(info.storeOverMpi);
    EXPECT_EQ(info.storeAddress, "");
    EXPECT_EQ(info.secret, "");  // rank 0 generates one
    EXPECT_TRUE(info.hostStore);
    info = detectLaunch(openMpi(3, 4, localSize));
    EXPECT_TRUE(info.storeOverMpi);
    EXPECT_FALSE(info.hostStore);
  }
  Env env = openMpi(1, 4, 1);
  env["GYRE_SECRET"] = "given";
  EXPECT_EQ(detectLaunch(env).secret, "given");
  EXPECT_TRUE(detectLaunch(env).storeOverMpi);
}

TEST(MpiTransport, AGivenStoreAddressWins) {
  Env env = openMpi(0, 4, 1);
  env["MASTER_ADDR"] = "node1";
  env["MASTER_PORT"] = "29500";
  LaunchInfo info = detectLaunch(env);
  EXPECT_FALSE(info.storeOverMpi);
  EXPECT_EQ(info.storeAddress, "node1:29500");
  env = openMpi(0, 4, 1);
  env["GYRE_STORE_ADDR"] = "file:/tmp/x.store";
  EXPECT_FALSE(detectLaunch(env).storeOverMpi);
  EXPECT_FALSE(detectLaunch(openMpi(0, 1, 1)).storeOverMpi);  // a world of one meets nobody
}

TEST(MpiTransport, WithoutItAcrossHostsTheErrorNamesIt) {
  Env env = openMpi(0, 4, 1);
  env["GYRE_TRANSPORT"] = "tcp";
  try {
    detectLaunch(env);
    ADD_FAILURE() << "multi-host mpirun without a store accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("GYRE_TRANSPORT=mpi"), std::string::npos) << e.what();
  }
}

#ifdef GYRE_WITH_MPI
// A world of one has no peer to talk to: MPI is not even initialized.
TEST(MpiTransport, AWorldOfOneNeedsNoMpi) {
  CommunicatorOptions o;
  o.transport = Transport::kMpi;
  auto comm = Communicator::create(createMemoryStore(), 0, 1, o);
  float x = 2.5f;
  comm->allreduce(&x, &x, 1);
  EXPECT_EQ(x, 2.5f);
}
#else
TEST(MpiTransport, ABuildWithoutMpiRefusesIt) {
  CommunicatorOptions o;
  o.transport = Transport::kMpi;
  try {
    Communicator::create(createMemoryStore(), 0, 1, o);
    ADD_FAILURE() << "transport mpi accepted in a build without MPI";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("built without MPI"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace gyre
