// The two ends of `gyre run --servers S` (docs/gyre-run.md, "Parameter servers"):
// Server::fromEnvironment (for `gyre ps-server`, apps/gyre/ps_server.cc) and
// Worker::fromEnvironment. Both meet at the job's store: server i publishes "ps/server/<i>" = its
// "host:port", workers wait for all S keys.
#include <chrono>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/config.h"
#include "common/socket.h"
#include "gyre/init.h"
#include "gyre/ps.h"
#include "gyre/store.h"
#include "rendezvous/connect.h"
#include "rendezvous/network_store.h"

namespace gyre::ps {
namespace {

using Ms = std::chrono::milliseconds;

std::string serverKey(int index) {
  return "ps/server/" + std::to_string(index);
}

// What both ends read from the environment `gyre run --servers` sets.
struct JobEnvironment {
  LaunchInfo launch;  // the store's address and the secret (and, for workers, rank and size)
  int numServers = 0;
  Ms timeout{0};       // GYRE_TIMEOUT_MS, else the caller's default
  Ms startTimeout{0};  // GYRE_START_TIMEOUT_MS: reaching the store, waiting for the servers
};

JobEnvironment readJob(const config::Env& env, Ms defaultTimeout) {
  JobEnvironment job;
  GYRE_ARG_CHECK(config::isSet(env, "GYRE_PS_SERVERS"),
                 "GYRE_PS_SERVERS is not set: this process was not started by gyre run --servers");
  job.numServers = static_cast<int>(config::getInt(env, "GYRE_PS_SERVERS"));
  job.launch = detectLaunch(env);
  GYRE_ARG_CHECK(!job.launch.storeAddress.empty(),
                 "the job's store address is not set (GYRE_STORE_ADDR; gyre run --servers sets it)");
  GYRE_ARG_CHECK(!job.launch.secret.empty(), "GYRE_SECRET is not set (gyre run --servers sets it)");
  const auto timeout = config::getOptionalInt(env, "GYRE_TIMEOUT_MS");
  job.timeout = timeout ? Ms(*timeout) : defaultTimeout;
  job.startTimeout = Ms(config::getInt(env, "GYRE_START_TIMEOUT_MS"));
  return job;
}

std::shared_ptr<Store> openStore(const LaunchInfo& launch, Ms timeout) {
  return rendezvous::connectStore(launch.storeAddress, launch.secret, timeout);
}

// Where a server listens: GYRE_IFACE, else the local address of its connection to the store (the
// interface that reaches the job's other hosts; loopback when the store is local), as the
// communicator chooses.
std::string bindAddress(const config::Env& env, const Store& store) {
  if (config::isSet(env, "GYRE_IFACE")) return net::resolveInterface(config::getString(env, "GYRE_IFACE"));
  if (const auto* network = dynamic_cast<const rendezvous::NetworkStore*>(&store))
    return network->localAddress();
  return "127.0.0.1";
}

}  // namespace

std::unique_ptr<Server> Server::fromEnvironment() {
  const config::Env env = config::processEnvironment();
  ServerOptions options;
  const JobEnvironment job = readJob(env, options.timeout);
  GYRE_ARG_CHECK(config::isSet(env, "GYRE_PS_SERVER_INDEX"),
                 "GYRE_PS_SERVER_INDEX is not set: this process was not started by gyre run --servers");
  const int index = static_cast<int>(config::getInt(env, "GYRE_PS_SERVER_INDEX"));
  GYRE_ARG_CHECK(index < job.numServers, "GYRE_PS_SERVER_INDEX=", index, " is not below GYRE_PS_SERVERS=",
                 job.numServers);
  const auto store = openStore(job.launch, job.startTimeout);
  options.index = index;
  options.numServers = job.numServers;
  options.bindAddress = bindAddress(env, *store);
  options.secret = job.launch.secret;
  options.timeout = job.timeout;
  std::unique_ptr<Server> server = Server::start(options);
  store->setString(serverKey(index), server->address());
  return server;
}

std::unique_ptr<Worker> Worker::fromEnvironment(const TableSpec& spec) {
  const config::Env env = config::processEnvironment();
  WorkerOptions options;
  const JobEnvironment job = readJob(env, options.timeout);
  options.workerId = job.launch.rank;
  options.numWorkers = job.launch.size;
  options.secret = job.launch.secret;
  options.timeout = job.timeout;

  const auto store = openStore(job.launch, job.startTimeout);
  std::vector<std::string> keys;
  for (int i = 0; i < job.numServers; ++i) keys.push_back(serverKey(i));
  try {
    store->wait(keys, job.startTimeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int i = 0; i < job.numServers; ++i)
      if (!store->check({keys[i]})) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    GYRE_THROW(TimeoutError, "worker ", options.workerId, ": parameter server(s) ", missing, " of ",
               job.numServers, " did not publish their address in the job's store within ",
               job.startTimeout.count(),
               " ms (GYRE_START_TIMEOUT_MS, gyre run --start-timeout); see their output");
  }
  for (const std::string& key : keys) options.servers.push_back(store->getString(key, job.startTimeout));
  return Worker::connect(options, spec);
}

}  // namespace gyre::ps
