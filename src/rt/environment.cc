// RuntimeOptions from a launcher's variables.
#include "api/open_store.h"
#include "api/options_env.h"
#include "common/config.h"
#include "common/socket.h"
#include "gyre/rt/runtime.h"

namespace gyre::rt {

RuntimeOptions RuntimeOptions::fromEnvironment() {
  auto env = config::processEnvironment();
  config::checkEnvironment(env);
  LaunchInfo info = detectLaunch(env);
  CommunicatorOptions comm;
  applyKnobs(env, comm);
  comm.secret = info.secret;
  RuntimeOptions o;
  o.rank = info.rank;
  o.size = info.size;
  o.secret = info.secret;
  if (o.size == 1) return o;
  o.store = openLaunchStore(info, env, comm);
  // Where this process listens: GYRE_IFACE; loopback when the whole job is on this host; else
  // this host's first address that is not loopback.
  if (!comm.interface.empty()) {
    o.host = net::resolveInterface(comm.interface);
  } else if (info.localSize < info.size) {
    const std::vector<std::string> addresses = net::externalAddresses();
    if (addresses.empty())
      throw InvalidArgument("gyre::rt: the job spans several hosts but this one has no address other than "
                            "loopback: set GYRE_IFACE");
    o.host = addresses.front();
  }
  return o;
}

}  // namespace gyre::rt
