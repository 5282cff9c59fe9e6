// `gyre ps-server`: the process main of a parameter server under `gyre run --servers S`. The
// library starts the server and publishes its address (ps::Server::fromEnvironment); this file
// owns what belongs to a process: the signals that stop it, its last line and its exit code.
#include "ps_server.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/ps.h"
#include "metrics/exposition.h"
#include "metrics/server.h"

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

// The server's figures for Prometheus (gyre run --metrics-port P serves server i's on P + 1 + i).
std::string serverMetrics(const ps::Server& server) {
  using metrics::Family;
  const ps::ServerStats s = server.stats();
  const metrics::Labels labels = {{"server", std::to_string(server.index())}};
  std::vector<Family> f;
  f.push_back(Family{
      "gyre_ps_server_updates_total",
      "Optimizer updates applied to slices this server leads",
      "counter",
      {}}.add(static_cast<double>(s.updates), labels));
  f.push_back(Family{
      "gyre_ps_server_replicated_total",
      "Updates applied as a backup of another server",
      "counter",
      {}}.add(static_cast<double>(s.replicated), labels));
  Family bytes{"gyre_ps_server_bytes_total", "Bytes received from and sent to workers", "counter", {}};
  metrics::Labels in = labels, out = labels;
  in.emplace_back("direction", "in");
  out.emplace_back("direction", "out");
  bytes.add(static_cast<double>(s.bytesIn), in).add(static_cast<double>(s.bytesOut), out);
  f.push_back(std::move(bytes));
  f.push_back(Family{
      "gyre_ps_server_refused_connections_total",
      "Connections that failed the handshake or sent a malformed message",
      "counter",
      {}}.add(static_cast<double>(s.refusedConnections), labels));
  f.push_back(Family{
      "gyre_ps_server_staleness",
      "Updates by staleness (other workers' updates between a worker's pull and its push; the last "
      "finite bucket also holds larger values)",
      "histogram",
      {}}.integerHistogram(std::vector<double>(s.staleness.begin(), s.staleness.end()), labels));
  return metrics::render(f);
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
    std::unique_ptr<metrics::Server> endpoint;
    const auto env = config::processEnvironment();
    if (config::isSet(env, "GYRE_PS_METRICS_PORT_BASE")) {
      const int port = static_cast<int>(config::getInt(env, "GYRE_PS_METRICS_PORT_BASE")) + server->index();
      const ps::Server& s = *server;
      endpoint = std::make_unique<metrics::Server>(
          "0.0.0.0", port, [&s] { return serverMetrics(s); },
          "--metrics-port (parameter server " + std::to_string(server->index()) + ")");
    }
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
