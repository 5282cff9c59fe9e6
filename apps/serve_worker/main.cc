// gyre_serve_worker: the process of `gyre serve` (the gyre tool replaces itself with it): loads
// the model, makes its replicas and serves HTTP until SIGINT or SIGTERM, then answers the
// requests it accepted and exits 0. Its first line names the address it serves, with the port it
// got for --port 0. With --replica-processes it is one process of a gyre::rt job that `gyre serve`
// starts: rank 0 serves HTTP and places the replicas' actors on the others, which host them until
// rank 0 has answered what it accepted.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <memory>
#include <thread>

#include "gyre/errors.h"
#include "gyre/rt.h"
#include "gyre/serve.h"
#include "serve/options.h"
#include "serve/process_replicas.h"
#include "serve/server.h"
#include "torch/compute_threads.h"

namespace {

// SIGINT and SIGTERM, on whichever thread they land (libtorch starts threads of its own), wake the
// watcher through this pipe; it stops the server.
int stopPipe[2] = {-1, -1};
volatile sig_atomic_t received = 0;

void onStopSignal(int sig) {
  received = sig;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(stopPipe[1], &byte, 1);
}

constexpr const char* kDoneKey = "gyre-serve/done";

// A replica process: hosts the actors rank 0 places here until rank 0 says it is done. SIGINT and
// SIGTERM do not end it: the server answers what it accepted first, on these replicas.
int hostReplicas(gyre::Store& store) {
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  while (true) {
    try {
      store.get(kDoneKey, std::chrono::minutes(10));
      return 0;
    } catch (const gyre::TimeoutError&) {  // still serving
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  gyre::serve::ServeOptions o;
  CLI::App app{"gyre_serve_worker: the process of gyre serve (see gyre serve --help)"};
  gyre::serve::addServeFlags(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    gyre::serve::validateServeOptions(o);
    if (::pipe2(stopPipe, O_CLOEXEC) != 0) throw gyre::Error("cannot make a pipe");
    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    signal(SIGPIPE, SIG_IGN);
    gyre::torch::setComputeThreads(o.threads);
    std::shared_ptr<gyre::Store> store;
    std::unique_ptr<gyre::rt::Runtime> rt;
    if (o.replicaProcesses) {
      const gyre::rt::RuntimeOptions ro = gyre::rt::RuntimeOptions::fromEnvironment();
      if (ro.size < 2)
        throw gyre::InvalidArgument(
            "--replica-processes: this process is not in a job with replica processes (run `gyre serve "
            "--replica-processes`, which starts them)");
      store = ro.store;
      rt = std::make_unique<gyre::rt::Runtime>(ro);
      if (rt->rank() != 0) return hostReplicas(*store);
    }
    struct Done {  // the replica processes end once the server has answered what it accepted
      gyre::Store* store;
      ~Done() {
        try {
          if (store != nullptr) store->set(kDoneKey, {1});
        } catch (const std::exception&) {  // the launcher is gone, and the replicas with it
        }
      }
    } done{store.get()};
    gyre::serve::ServedModel model = gyre::serve::loadServedModel(o.model, o.name);
    const std::string name = model.name, kind = model.kind;
    std::unique_ptr<gyre::serve::ProcessReplicas> processes;
    if (rt) {
      processes = std::make_unique<gyre::serve::ProcessReplicas>(*rt, o.model, o.name);
      model.makeReplica = [p = processes.get()] { return p->make(); };
    }
    gyre::serve::ModelServer server(std::move(model), o);
    fmt::print("gyre serve: {} ({}) on http://{}:{} with {} replica{}, batches of up to {} rows waiting up to {} ms\n",
               name, kind, o.host, server.port(), o.replicas, o.replicas == 1 ? "" : "s", o.maxBatchSize,
               o.batchWaitMs);
    fmt::print("  POST /v1/models/{}:predict  POST /v2/models/{}/infer  GET /healthz /readyz /metrics\n", name, name);
    if (processes) {
      std::string pids;
      for (const int pid : processes->processIds()) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
      fmt::print("  replica processes (gyre::rt actors): {}\n", pids);
    }
    std::fflush(stdout);
    std::thread watcher([&] {
      char byte = 0;
      while (::read(stopPipe[0], &byte, 1) < 0 && errno == EINTR) {
      }
      server.stop();
    });
    server.serve();
    if (received == 0) {  // the server stopped by itself: wake the watcher
      const char byte = 0;
      [[maybe_unused]] const ssize_t n = ::write(stopPipe[1], &byte, 1);
    }
    watcher.join();
    std::fprintf(stderr, "gyre serve: stopped by %s; every accepted request was answered\n",
                 received == SIGINT ? "SIGINT" : "SIGTERM");
    return 0;
  } catch (const gyre::InvalidArgument& e) {
    std::fprintf(stderr, "gyre serve: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre serve: %s\n", e.what());
    return 1;
  }
}
