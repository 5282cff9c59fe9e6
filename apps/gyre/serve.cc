#include "serve.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "gyre/errors.h"
#include "launcher/agent.h"
#include "launcher/job.h"
#include "launcher/process.h"
#include "serve/options.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

int serve(const serve::ServeOptions& o) {
  serve::validateServeOptions(o);
  const std::string worker = (fs::path(launcher::selfExecutable()).parent_path() / "gyre_serve_worker").string();
  if (::access(worker.c_str(), X_OK) != 0)
    throw Error("this gyre was built without the server: " + worker +
                " is missing (install libtorch-dev, then configure and build again; see docs/serving.md)");
  std::vector<std::string> args = {worker};
  const std::vector<std::string> rest = serve::serveWorkerArguments(o);
  args.insert(args.end(), rest.begin(), rest.end());
  if (o.replicaProcesses) {
    // The server (rank 0) and one process per replica, a gyre::rt job on this host: a replica's
    // process that dies does not stop it (--keep-going); stopping the server stops the rest.
    launcher::RunOptions run;
    run.np = serve::replicaProcessCount(o) + 1;
    run.tagOutput = false;
    run.threads = o.threads;
    run.keepGoing = true;
    run.stopGraceMs = 10000;  // the server answers what it accepted before it exits
    if (run.np > launcher::usableCores() && !config::isSet(config::processEnvironment(), "GYRE_SPIN_US"))
      run.exports.emplace_back("GYRE_SPIN_US", "0");  // waits that spin take the cycles the replicas need
    run.program = args;
    return launcher::runJob(run);
  }
  ::execv(worker.c_str(), launcher::execPointers(args).data());
  throw Error("cannot start " + worker + ": " + std::strerror(errno));
}

}  // namespace

void addServe(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<serve::ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "A trained model behind HTTP, its requests batched over its replicas");
  cmd->footer(
      "Loads MODEL (a run directory of gyre train, or a TorchScript module saved with torch.jit.save) into\n"
      "--replicas copies and serves it over HTTP until Ctrl-C or SIGTERM, after which it answers what it\n"
      "accepted. Requests wait up to --batch-wait-ms for others to fill a batch of --max-batch-size rows,\n"
      "which runs in one forward pass on a free replica.\n"
      "  POST /v1/models/NAME:predict  {\"instances\": [row, ...]} -> {\"predictions\": [...]}\n"
      "                                or raw float32 (application/octet-stream, X-Gyre-Shape: 2,1,28,28)\n"
      "  POST /v2/models/NAME/infer    KServe v2: {\"inputs\": [{\"name\", \"shape\", \"datatype\", \"data\"}]}\n"
      "  GET  /v1/models/NAME  /healthz  /readyz  /metrics (Prometheus)\n"
      "Bad requests get a 4xx and a JSON error naming the problem. See docs/serving.md.\n\n"
      "Examples:\n"
      "  gyre train --model cnn --np 2 --run-dir runs/cnn && gyre serve runs/cnn --port 8000\n"
      "  curl -s localhost:8000/v1/models/cnn:predict -d '{\"instances\": [[...784 pixels...]]}'\n"
      "  gyre serve model.ts --name mine --replicas 2 --max-batch-size 64 --batch-wait-ms 2");
  serve::addServeFlags(*cmd, *o);
  cmd->callback([o, &action] { action = [o] { return serve(*o); }; });
}

}  // namespace gyre::app
