#include "bench_worker.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>

#include "api/options_env.h"
#include "bench_ops.h"
#include "bench_report.h"
#include "common/config.h"
#include "gyre/communicator.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/store.h"

namespace gyre::app {
namespace {

void writeLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("writing a result to the gyre parent failed (did it exit?)");
    done += static_cast<std::size_t>(n);
  }
}

// The maximum over ranks of a per-rank value, through the communicator itself.
double maxOverRanks(Communicator& comm, double value) {
  double result = 0;
  AllreduceOptions o;
  o.dtype = DataType::kFloat64, o.op = ReduceOp::kMax;
  comm.allreduce(&value, &result, 1, o);
  return result;
}

}  // namespace

std::size_t runSweep(Communicator& comm, const BenchOptions& o,
                     const std::function<void(const BenchRow&)>& onRow) {
  const BenchOp op = parseBenchOp(o.op);
  const DataType dtype = parseDataType(o.dtype);
  const ReduceOp redop = parseReduceOp(o.redop);
  const auto algorithms = algorithmsToRun(op, o.algo);
  OpRunner runner(comm, op, dtype, redop, o.inplace, o.maxBytes);
  runner.fillForTiming();

  std::size_t failedChecks = 0;
  for (std::uint64_t requested : sweepSizes(o, op)) {
    const std::uint64_t count = runner.setSize(requested);
    const int iters = itersFor(o, requested);
    for (const std::string& algo : algorithms) {
      runner.setAlgorithm(algo);
      BenchRow row;
      if (o.check) {
        const double wrong = static_cast<double>(runner.check());
        row.checkOk = maxOverRanks(comm, wrong) == 0;
        if (!*row.checkOk) ++failedChecks;
        runner.fillForTiming();
      }
      for (int i = 0; i < o.warmup; ++i) runner.run();
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) runner.run();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double maxSeconds = maxOverRanks(comm, seconds / iters);
      if (comm.rank() != 0) continue;
      row.bytes = count * dtypeSize(dtype);
      row.count = count;
      row.timeUs = maxSeconds * 1e6;
      row.op = toString(op);
      row.algo = algo;
      row.dtype = toString(dtype);
      row.redop = toString(redop);
      row.transport = o.transport;
      row.np = comm.size();
      row.inplace = o.inplace;
      row.iters = iters;
      onRow(row);
    }
  }
  return failedChecks;
}

CommunicatorOptions benchCommunicatorOptions(const BenchOptions& o, const std::string& secret) {
  CommunicatorOptions options;
  applyKnobs(config::processEnvironment(), options);  // GYRE_IFACE, GYRE_SPIN_US, ... as init() does
  options.transport = parseTransport(o.transport);
  options.secret = secret;
  options.timeout = std::chrono::seconds(o.opTimeoutS);
  options.name = "bench";
  return options;
}

int runBenchWorker(const BenchOptions& o) {
  const std::string secret = config::getString(config::processEnvironment(), kSecretEnv);
  unsetenv(kSecretEnv);
  try {
    if (secret.empty())
      throw InvalidArgument(std::string(kSecretEnv) + " is not set (worker mode is internal)");
    if (o.workerRank == 0 && o.workerResultFd < 0) throw InvalidArgument("rank 0 needs a result descriptor");
    auto store = connectTcpStore(o.workerStore, secret, std::chrono::seconds(o.opTimeoutS));
    auto comm = Communicator::create(store, o.workerRank, o.workerSize, benchCommunicatorOptions(o, secret));
    runSweep(*comm, o, [&](const BenchRow& row) { writeLine(o.workerResultFd, toJson(row).dump()); });
    return 0;
  } catch (const std::exception& e) {
    printRankError(o.workerRank, e);
  }
  return 1;
}

void printRankError(int rank, const std::exception& e) {
  if (const auto* lost = dynamic_cast<const PeerLostError*>(&e)) {
    fmt::print(stderr, "gyre bench: rank {}: lost rank {}: {}\n", rank, lost->rank(), e.what());
  } else if (dynamic_cast<const TimeoutError*>(&e) != nullptr) {
    fmt::print(stderr, "gyre bench: rank {}: timed out: {}\n", rank, e.what());
  } else {
    fmt::print(stderr, "gyre bench: rank {}: {}\n", rank, e.what());
  }
}

}  // namespace gyre::app
