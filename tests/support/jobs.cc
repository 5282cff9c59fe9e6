#include "support/jobs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gyre::test {

std::string binDir() {
  return GYRE_TEST_BIN_DIR;
}

std::string sourceDir() {
  return GYRE_SOURCE_DIR;
}

std::string gyreTool() {
  return binDir() + "/gyre";
}

ProgramRun gyreRun(std::vector<std::string> args, const Environment& env, std::chrono::seconds timeout) {
  args.insert(args.begin(), {gyreTool(), "run"});
  return runProgram({args, env}, timeout);
}

std::string findOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<std::string> rankLines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("rank ")) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

JobRun runJob(std::vector<std::string> argv, const Environment& env, std::chrono::seconds timeout) {
  if (!argv.empty()) {
    const std::string found = findOnPath(argv[0]);
    if (!found.empty()) argv[0] = found;
  }
  JobRun job;
  job.run = runProgram({std::move(argv), env}, timeout);
  job.rankLines = rankLines(job.run.out);
  std::istringstream in(job.run.out);
  bool okLine = false;
  for (std::string line; std::getline(in, line);) okLine |= line == "OK";
  job.ok = okLine && job.run.exitCode == 0 && !job.run.timedOut;
  return job;
}

std::vector<std::string> mpirunCommand(int np, const Environment& env,
                                       const std::vector<std::string>& program,
                                       const std::vector<std::string>& extraFlags) {
  const std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty()) return {};
  std::vector<std::string> argv = {mpirun, "--oversubscribe"};
  if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
  for (const auto& [name, value] : env)
    if (name.starts_with("GYRE_")) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), extraFlags.begin(), extraFlags.end());
  argv.insert(argv.end(), {"-np", std::to_string(np)});
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::string fakeRsh(const TempDir& dir, int holdFrom, const std::string& sleep) {
  const std::string path = dir.path() + "/fake-rsh";
  std::string script = "#!/bin/sh\nhost=$1\nshift\n";
  if (holdFrom > 0)
    script += "echo x >> " + dir.path() + "/rsh.$host\nif [ $(wc -l < " + dir.path() + "/rsh.$host) -ge " +
              std::to_string(holdFrom) + " ]; then touch " + dir.path() + "/held; exec sleep " + sleep +
              "; fi\n";
  script += "exec /bin/sh -c \"$*\"\n";
  std::ofstream(path) << script;
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace gyre::test
