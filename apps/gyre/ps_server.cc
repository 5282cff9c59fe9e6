#include "ps_server.h"

#include "gyre/ps.h"

namespace gyre::app {

void addPsServer(CLI::App& app, std::function<int()>& action) {
  CLI::App* cmd = app.add_subcommand(
      "ps-server", "A parameter server process (started by gyre run --servers; not for direct use)");
  cmd->footer(
      "Reads GYRE_PS_SERVER_INDEX, GYRE_PS_SERVERS, GYRE_STORE_ADDR, GYRE_SECRET, GYRE_IFACE and\n"
      "GYRE_TIMEOUT_MS, publishes its address in the job's store as ps/server/<index>, and serves until\n"
      "SIGTERM or SIGINT. See docs/gyre-run.md, \"Parameter servers\".");
  cmd->callback([&action] { action = [] { return ps::serveFromEnvironment(); }; });
}

}  // namespace gyre::app
