#include "mpi_baseline.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench_programs.h"
#include "common/check.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

std::string locateMpiBench(const BenchOptions& o) {
  if (!o.mpiBench.empty()) return givenProgram("--mpi-bench", o.mpiBench);
  const std::string dir = toolDirectory();
  const std::string beside = launcher::findExecutable(dir + "/gyre_mpi_bench");
  GYRE_USAGE_CHECK(!beside.empty(), "--baseline mpi needs gyre_mpi_bench, which is not in ", dir,
                   " (it is built only when CMake finds MPI: install libopenmpi-dev, re-run cmake, build "
                   "target gyre_mpi_bench) or pass --mpi-bench PATH");
  return beside;
}

std::vector<std::string> mpiArguments(const BenchOptions& o, const std::string& mpirun,
                                      const std::string& program) {
  std::vector<std::string> argv = {mpirun, "--oversubscribe", "-np", std::to_string(o.np)};
  if (geteuid() == 0) argv.emplace_back("--allow-run-as-root");
  const std::vector<std::string> args = {
      program,
      "--op",
      o.op,
      "--dtype",
      std::string(toString(parseDataType(o.dtype))),
      "--redop",
      std::string(toString(parseReduceOp(o.redop))),
      "--min-bytes",
      std::to_string(o.minBytes),
      "--max-bytes",
      std::to_string(o.maxBytes),
      "--step-factor",
      std::to_string(o.stepFactor),
      "--iters",
      std::to_string(o.iters),
      "--warmup",
      std::to_string(o.warmup),
      o.inplace ? "--inplace" : "--no-inplace",
  };
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

MpiBaseline runMpiBaseline(const BenchOptions& o, Deadline deadline) {
  const DataType dtype = parseDataType(o.dtype);
  GYRE_USAGE_CHECK(dtype != DataType::kFloat16 && dtype != DataType::kBFloat16, "--baseline mpi: MPI has no ",
                   toString(dtype), " type; use float32, float64 or an integer type");
  const std::string mpirun = launcher::findExecutable(o.mpirun);
  GYRE_USAGE_CHECK(!mpirun.empty(), "--baseline mpi needs ", o.mpirun,
                   ", which is not on PATH (install openmpi-bin: scripts/install-deps.sh)");
  MpiBaseline baseline;
  baseline.program = locateMpiBench(o);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2 failed");
  launcher::ChildSpec spec;
  spec.name = "mpirun";
  spec.path = mpirun;
  spec.argv = mpiArguments(o, mpirun, baseline.program);
  spec.stdoutFd = fds[1];
  spec.ownProcessGroup = true;  // stopping mpirun stops its ranks too
  launcher::ProcessGroup group;
  group.spawn(spec);
  close(fds[1]);

  const launcher::SuperviseResult result = launcher::supervise(
      group, fds[0], deadline, "MPI baseline (" + o.mpirun + ")", [&](const std::string& line) {
        if (line.empty() || line[0] != '{') {
          fmt::print(stderr, "mpirun: {}\n", line);
          return;
        }
        const auto j = nlohmann::json::parse(line);
        baseline.timeUs[j.at("bytes").get<std::uint64_t>()] = j.at("time_us").get<double>();
      });
  close(fds[0]);
  if (!result.ok) throw Error(result.error);
  GYRE_ENFORCE(!baseline.timeUs.empty(), "gyre_mpi_bench printed no results");
  return baseline;
}

}  // namespace gyre::app
