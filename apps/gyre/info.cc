#include "info.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>

#include "common/config.h"
#include "gyre/version.h"
#include "info/info_report.h"
#include "launcher/process.h"

extern char** environ;

namespace gyre::app {
namespace {

// `--version` commands must answer within this; a launcher that hangs costs no more.
constexpr std::chrono::milliseconds kVersionTimeout{3000};

// The GYRE_* variables of this process.
config::Env gyreEnvironment() {
  config::Env env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (entry.rfind("GYRE_", 0) == 0 && eq != std::string::npos)
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::string environmentValue(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Finds a launcher in PATH and, when `versionArgs` are given, asks it its version (in a thread
// of its own: the launchers answer in parallel).
std::future<info::LauncherStatus> probeLauncher(std::string name, std::vector<std::string> versionArgs,
                                                std::string note) {
  return std::async(std::launch::async,
                    [name = std::move(name), versionArgs = std::move(versionArgs), note = std::move(note)] {
                      info::LauncherStatus status{name, launcher::findExecutable(name), "", note};
                      if (status.path.empty() || versionArgs.empty()) return status;
                      std::vector<std::string> argv{status.path};
                      argv.insert(argv.end(), versionArgs.begin(), versionArgs.end());
                      info::CommandOptions options;
                      options.timeout = kVersionTimeout;
                      const info::CommandResult result = info::runCommand(argv, options);
                      if (result.ok()) {
                        status.version = info::versionLine(result.output);
                      } else {
                        const std::string said = info::versionLine(result.output);
                        status.note = fmt::format("(`{} {}` failed: {}{})", name, versionArgs.front(),
                                                  result.error, said.empty() ? "" : ": " + said);
                      }
                      return status;
                    });
}

info::Report gatherReport() {
  info::Report r;
  r.version = kVersion;
  r.executable = launcher::selfExecutable();
#ifdef GYRE_WITH_MPI
  r.mpiTransport = true;
#endif
  auto mpirun = probeLauncher("mpirun", {"--version"}, "");
  auto srun = probeLauncher("srun", {"--version"}, "");
  auto torchrun = probeLauncher("torchrun", {}, "(start native programs with --no_python)");
  auto ssh = probeLauncher("ssh", {"-V"}, "");
  r.launchers.push_back({"gyre run", r.executable, "", "(this executable)"});

  const std::string dir = r.executable.substr(0, r.executable.rfind('/'));
  r.mpiBenchmark = launcher::findExecutable(dir + "/gyre_mpi_bench");
  r.multiarch = info::multiarchTriple();
  r.torch = info::probeTorch(environmentValue("CMAKE_PREFIX_PATH"));
  r.blas = info::probeBlas(info::blasSoname(r.torch.needed));
  r.cores = info::countCores();
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    r.threadVariables.emplace_back(name, environmentValue(name));
  r.gyreEnv = gyreEnvironment();

  for (auto* launcher : {&mpirun, &srun, &torchrun, &ssh}) r.launchers.push_back(launcher->get());
  return r;
}

int runInfo(bool json) {
  const info::Report report = gatherReport();
  if (!json) {
    fmt::print("{}", info::formatReportText(report));
    return 0;
  }
  fmt::print("{}", info::formatReportJson(report));
  std::fflush(stdout);  // whole, before anything on stderr
  // stdout is for tools here; people still need to see this.
  const std::string warning =
      info::blasWarning(report.blas.verdict, report.blas.soname, report.blas.chain, report.multiarch);
  if (!warning.empty()) fmt::print(stderr, "{}", warning);
  return 0;
}

}  // namespace

void addInfo(CLI::App& app, std::function<int()>& action) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "info", "Print the version, transports, launchers, libtorch and its BLAS, cores and GYRE_* knobs");
  cmd->add_flag("--json", *json, "One JSON object instead of text");
  cmd->callback([json, &action] { action = [json] { return runInfo(*json); }; });
}

}  // namespace gyre::app
