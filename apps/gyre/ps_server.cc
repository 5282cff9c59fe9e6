// `gyre ps-server`: the process main of a parameter server under `gyre run --servers S`. The
// library starts the server and publishes its address (ps::Server::fromEnvironment); this file
// owns what belongs to a process: the signals that stop it, its last line and its exit code.
#include "ps_server.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>

#include "gyre/errors.h"
#include "gyre/ps.h"

namespace gyre::app {
namespace {

std::string statsLine(const ps::Server& server, int signal) {
  const ps::ServerStats s = server.stats();
  return "gyre ps-server " + std::to_string(server.index()) + " (" + server.address() + "): stopped by " +
         (signal == SIGINT ? "SIGINT" : "SIGTERM") + "; " + std::to_string(s.updates) + " updates, " +
         std::to_string(s.replicated) + " replicated, " + std::to_string(s.bytesIn) + " bytes in, " +
         std::to_string(s.bytesOut) + " bytes out, " + std::to_string(s.refusedConnections) +
         " connections refused";
}

// Serves until SIGTERM or SIGINT; returns the exit code.
int serve() {
  // Blocked before any thread exists, so every thread inherits the mask and the signals wait for
  // sigwait() below instead of ending the process.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  try {
    const std::unique_ptr<ps::Server> server = ps::Server::fromEnvironment();
    int signal = 0;
    while (sigwait(&stopSignals, &signal) != 0) {
    }
    std::fprintf(stderr, "%s\n", statsLine(*server, signal).c_str());
    return 0;
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "gyre ps-server: invalid environment: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre ps-server: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

void addPsServer(CLI::App& app, std::function<int()>& action) {
  CLI::App* cmd = app.add_subcommand(
      "ps-server", "A parameter server process (started by gyre run --servers; not for direct use)");
  cmd->footer(
      "Reads GYRE_PS_SERVER_INDEX, GYRE_PS_SERVERS, GYRE_STORE_ADDR, GYRE_SECRET, GYRE_IFACE and\n"
      "GYRE_TIMEOUT_MS, publishes its address in the job's store as ps/server/<index>, and serves until\n"
      "SIGTERM or SIGINT. See docs/gyre-run.md, \"Parameter servers\".");
  cmd->group("");  // not listed in `gyre --help`: users start servers through gyre run --servers
  cmd->callback([&action] { action = [] { return serve(); }; });
}

}  // namespace gyre::app
