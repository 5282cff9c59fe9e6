#include "bench_launched.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bench_report.h"
#include "bench_worker.h"
#include "common/check.h"
#include "common/config.h"
#include "common/logging.h"
#include "gyre/communicator.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

// Ends the process with exit code 1 when --timeout passes before it is destroyed. Under a
// launcher nobody else enforces the bench's own --timeout, and a rank that waits on a peer
// stuck outside gyre's calls must not wait forever.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, int rank)
      : thread_([this, limit, rank] {
          std::unique_lock lock(mutex_);
          if (stopped_.wait_for(lock, limit, [this] { return done_; })) return;
          fmt::print(stderr, "gyre bench: rank {}: --timeout {} s passed; exiting\n", rank, limit.count());
          std::fflush(stderr);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    stopped_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// init() applies GYRE_TRANSPORT and GYRE_TIMEOUT_MS over the options it is given; setting them to
// the flags' values first keeps the precedence of the bench's own ranks: flag, then variable
// (--transport reads GYRE_TRANSPORT when absent), then default.
void pinKnobsToFlags(const BenchOptions& o) {
  ::setenv("GYRE_TRANSPORT", o.transport.c_str(), 1);
  ::setenv("GYRE_TIMEOUT_MS", std::to_string(std::int64_t{o.opTimeoutS} * 1000).c_str(), 1);
}

}  // namespace

LaunchInfo detectLaunchQuietly() {
  const log::Level level = log::level();
  log::setLevel(log::Level::kError);
  try {
    LaunchInfo job = detectLaunch(config::processEnvironment());
    log::setLevel(level);
    return job;
  } catch (...) {
    log::setLevel(level);
    throw;
  }
}

int runLaunchedBench(BenchOptions o, bool npGiven, const LaunchInfo& job) {
  GYRE_USAGE_CHECK(!npGiven || o.np == job.size, "--np ", o.np, " does not match the ", job.size,
                   " ranks that ", job.launcher, " started; leave --np out under a launcher");
  GYRE_USAGE_CHECK(
      o.baseline != "mpi", "--baseline mpi is not available when ", job.launcher,
      " starts the ranks: run `gyre bench collectives --np N --baseline mpi` outside any launcher");
  o.np = job.size;
  validate(o);
  pinKnobsToFlags(o);

  const Watchdog watchdog(std::chrono::seconds(o.timeoutS), job.rank);
  try {
    CommunicatorOptions options;
    options.name = "bench";
    const std::shared_ptr<Communicator> comm = init(options);
    BenchPrinter printer(o, /*withMpi=*/false);
    if (comm->rank() == 0) printer.header();
    std::size_t rows = 0;
    const std::size_t failed = runSweep(*comm, o, [&](const BenchRow& row) {
      printer.row(row);
      ++rows;
    });
    if (failed == 0) return 0;
    if (comm->rank() == 0) fmt::print(stderr, "gyre bench: {}\n", failedChecksText(failed, rows));
    return 1;
  } catch (const InvalidArgument&) {
    throw;
  } catch (const std::exception& e) {
    printRankError(job.rank, e);
  }
  return 1;
}

}  // namespace gyre::app
