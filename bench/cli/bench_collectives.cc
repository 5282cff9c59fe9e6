#include "bench_collectives.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <optional>

#include "bench_launched.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_worker.h"
#include "common/auth.h"
#include "common/check.h"
#include "gyre/init.h"
#include "gyre/store.h"
#include "launcher/process.h"
#include "mpi_baseline.h"

namespace gyre::app {
namespace {

// The parent: baseline first (so the two never share the cores), then the gyre ranks.
int runBench(const BenchOptions& o, const std::vector<std::string>& args) {
  validate(o);
  benchCommunicatorOptions(o, "");  // the knobs, checked once here rather than on every rank
  launcher::installInterruptHandlers();
  const Deadline deadline = Deadline::after(std::chrono::seconds(o.timeoutS));

  std::optional<MpiBaseline> mpi;
  if (o.baseline == "mpi") mpi = runMpiBaseline(o, deadline);

  const std::string secret = auth::generateSecret();
  const std::unique_ptr<TcpStoreServer> server = createTcpStoreServer(secret, "127.0.0.1", 0);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2 failed");

  launcher::ProcessGroup group;
  for (int rank = 0; rank < o.np; ++rank) {
    launcher::ChildSpec spec;
    spec.name = "rank " + std::to_string(rank);
    spec.path = "/proc/self/exe";
    spec.argv = rankArguments(args, rank, o.np, server->address(), fds[1]);
    spec.env = {{kSecretEnv, secret}};
    if (rank == 0) spec.keepFd = fds[1];
    group.spawn(spec);
  }
  close(fds[1]);

  BenchPrinter printer(o, mpi.has_value());
  printer.header();
  std::size_t rows = 0;
  std::size_t failedChecks = 0;
  const launcher::SuperviseResult result =
      launcher::supervise(group, fds[0], deadline, "", [&](const std::string& line) {
        BenchRow row = rowFromJson(nlohmann::json::parse(line));
        if (mpi) addMpiTime(row, mpi->timeUs);
        if (row.checkOk && !*row.checkOk) ++failedChecks;
        printer.row(row);
        ++rows;
      });
  close(fds[0]);
  if (!result.ok) {
    fmt::print(stderr, "gyre bench: {}\n", result.error);
    return result.exitCode;
  }
  const std::string shortfall = sweepShortfall(o, rows, failedChecks);
  if (!shortfall.empty()) fmt::print(stderr, "gyre bench: {}\n", shortfall);
  return shortfall.empty() ? 0 : 1;
}

}  // namespace

void addBenchCollectives(CLI::App& bench, std::function<int()>& action,
                         const std::vector<std::string>& args) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "collectives",
      "Time a collective over a sweep of message sizes on N local ranks, or as one rank of a launched job");
  cmd->footer(
      "Units as in nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n (allreduce),\n"
      "(n-1)/n (allgather, reducescatter, alltoall), 1 (broadcast, reduce). See docs/benchmarks.md.\n\n"
      "Examples:\n"
      "  gyre bench collectives --np 2 --algo all --baseline mpi\n"
      "  gyre bench collectives --np 4 --op allgather --max-bytes 16M --json\n"
      "  gyre bench collectives --np 2 --max-bytes 1M --check\n\n"
      "Started by a launcher (gyre run, mpirun, srun, torchrun), each process is one rank of the job and\n"
      "rank 0 prints the table:\n"
      "  gyre run -np 4 -- gyre bench collectives --algo all --check");

  CLI::Option* npOption =
      cmd->add_option("--np", o->np, "Number of local ranks to start (under a launcher: the job's size)")
          ->capture_default_str();
  cmd->add_option("--op", o->op, "Collective to time")
      ->check(CLI::IsMember(benchOpNames()))
      ->capture_default_str();
  cmd->add_option("--algo", o->algo,
                  "Algorithm; allreduce: auto|naive|ring|halving-doubling|tree|hierarchical|all, broadcast: "
                  "auto|chain|tree|all "
                  "(all: every algorithm, auto first)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "float32|float64|float16|bfloat16|int8|uint8|int32|int64")
      ->capture_default_str();
  cmd->add_option("--redop", o->redop, "sum|average|product|min|max")->capture_default_str();
  cmd->add_option("--transport", o->transport, "auto|tcp|shm|mpi (mpi: only when started by mpirun)")
      ->envname("GYRE_TRANSPORT")
      ->capture_default_str();
  cmd->add_option("--min-bytes", o->minBytes, "Smallest message (suffixes K, M, G = 1024^n)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--max-bytes", o->maxBytes, "Largest message")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--step-factor", o->stepFactor, "Multiply the size by this between steps")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed calls per size; 0: 50 up to 1 MiB, 10 up to 16 MiB, 4 above")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed calls before each timed run")->capture_default_str();
  cmd->add_flag("--inplace,!--no-inplace", o->inplace,
                "Output buffer is the input (allreduce, allgather, reducescatter; default on)");
  cmd->add_flag("--check", o->check, "Verify each size's result against the expected values once");
  cmd->add_flag("--json", o->json, "One JSON object per line instead of a table");
  cmd->add_option("--baseline", o->baseline, "mpi: also time OpenMPI's own collective and print the ratio")
      ->check(CLI::IsMember({"mpi", "none"}));
  cmd->add_option("--mpi-bench", o->mpiBench, "The gyre_mpi_bench program (default: next to gyre)");
  cmd->add_option("--mpirun", o->mpirun, "The mpirun to start it with")->capture_default_str();
  cmd->add_option("--timeout", o->timeoutS, "Seconds for the whole run; then every rank is stopped")
      ->capture_default_str();
  cmd->add_option("--op-timeout", o->opTimeoutS, "Seconds one collective may take")->capture_default_str();

  // Hidden worker mode: the parent starts each rank with these.
  cmd->add_option("--worker-rank", o->workerRank)->group("");
  cmd->add_option("--worker-size", o->workerSize)->group("");
  cmd->add_option("--worker-store", o->workerStore)->group("");
  cmd->add_option("--worker-result-fd", o->workerResultFd)->group("");

  cmd->callback([o, npOption, &action, &args] {
    action = [o, npOption, &args] {
      if (o->isWorker()) return runBenchWorker(*o);
      const LaunchInfo job = detectLaunchQuietly();
      if (job.launcher != "none") return runLaunchedBench(*o, npOption->count() > 0, job);
      return runBench(*o, args);
    };
  });
}

}  // namespace gyre::app
