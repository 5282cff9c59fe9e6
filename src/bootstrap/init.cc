// gyre::init(): the environment -> a store -> the world communicator, or, under `gyre run
// --elastic`, the first membership that admits this worker. It sits above api/ and elastic/,
// both of which it chooses between.
#include "gyre/init.h"

#include "api/open_store.h"
#include "api/options_env.h"
#include "common/check.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/socket.h"
#include "gyre/elastic.h"

namespace gyre {

std::shared_ptr<Communicator> init(CommunicatorOptions options) {
  auto env = config::processEnvironment();
  config::checkEnvironment(env);  // a malformed GYRE_* value stops here, named
  // detectLaunch reads the transport from the environment (it decides how an mpirun job meets);
  // a transport asked for in code counts too when the environment does not override it.
  if (options.transport == Transport::kMpi && !config::isSet(env, "GYRE_TRANSPORT"))
    env["GYRE_TRANSPORT"] = "mpi";
  // Under `gyre run --elastic`: the first membership that admits this worker (a program that
  // does not use gyre::elastic::run simply fails when the membership changes).
  if (auto elastic = elastic::Options::fromEnvironment(options)) {
    return elastic::Rendezvous(std::move(*elastic)).join();
  }
  LaunchInfo info = detectLaunch(env);
  applyKnobs(env, options);
  if (options.secret.empty()) options.secret = info.secret;
  log::info("init: launcher ", info.launcher, ", rank ", info.rank, " of ", info.size, ", local ",
            info.localRank, " of ", info.localSize, ", store ",
            info.storeOverMpi           ? "hosted by rank 0, its address sent over MPI"
            : info.storeAddress.empty() ? "in-process"
                                        : info.storeAddress);
  const Timeout opTimeout = options.timeout;
  if (options.startTimeout.count() > 0) options.timeout = options.startTimeout;
  try {
    auto store = openLaunchStore(info, env, options);
    options.timeout = opTimeout;
    auto world = Communicator::create(store, info.rank, info.size, options);
    store->setTimeout(opTimeout);
    return world;
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    // One line that says who failed to start, where, and what it tried to reach.
    GYRE_THROW(Error, "rank ", info.rank, " of ", info.size, " on host ", net::hostName(),
               " could not start (store ",
               !info.storeAddress.empty() ? info.storeAddress
               : info.storeOverMpi        ? std::string("to be sent over MPI")
                                          : std::string("in-process"),
               ", start-up time-out ",
               (options.startTimeout.count() > 0 ? options.startTimeout : opTimeout).count(),
               " ms): ", e.what());
  }
}

}  // namespace gyre
