#include "info.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/config.h"
#include "gyre/version.h"
#include "process.h"

extern char** environ;

namespace gyre::app {
namespace {

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return static_cast<int>(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

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

int runInfo(bool json) {
  const std::string self = selfExecutable();
  const std::string mpiBench = findExecutable(self.substr(0, self.rfind('/')) + "/gyre_mpi_bench");
  const std::string mpirun = findExecutable("mpirun");
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const config::Env env = gyreEnvironment();
  if (json) {
    nlohmann::json j = {{"version", kVersion},
                        {"cores_online", online},
                        {"cores_usable", usableCores()},
                        {"transports", {"tcp", "shm"}},
                        {"mpirun", mpirun},
                        {"gyre_mpi_bench", mpiBench},
                        {"knobs", nlohmann::json::array()}};
    for (const config::Knob& k : config::knobs()) {
      nlohmann::json knob = {{"name", k.name}, {"default", k.defaultValue}, {"doc", k.doc}};
      if (!k.choices.empty()) knob["choices"] = k.choices;
      if (const auto it = env.find(std::string(k.name)); it != env.end()) knob["value"] = it->second;
      j["knobs"].push_back(knob);
    }
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("gyre {}\n", kVersion);
  fmt::print("  executable      {}\n", self);
  fmt::print("  cores           {} online, {} usable by this process\n", online, usableCores());
  fmt::print("  transports      tcp, shm (shared memory between ranks on one host)\n");
  fmt::print("  mpirun          {}\n",
             mpirun.empty() ? "not found (the MPI baseline needs openmpi-bin)" : mpirun);
  fmt::print("  gyre_mpi_bench  {}\n", mpiBench.empty() ? "not built (CMake did not find MPI)" : mpiBench);
  fmt::print("\nEnvironment knobs (docs/configuration.md):\n{}", config::formatText());
  std::string set;
  for (const config::Knob& k : config::knobs()) {
    if (const auto it = env.find(std::string(k.name)); it != env.end())
      set += fmt::format("  {}={}\n", k.name, it->second);
  }
  fmt::print("\nSet in this environment:\n{}", set.empty() ? "  (none)\n" : set);
  return 0;
}

}  // namespace

void addInfo(CLI::App& app, std::function<int()>& action) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("info", "Print the version, cores, transports and GYRE_* environment knobs");
  cmd->add_flag("--json", *json, "One JSON object instead of text");
  cmd->callback([json, &action] { action = [json] { return runInfo(*json); }; });
}

}  // namespace gyre::app
