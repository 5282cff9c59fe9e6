#include "bench_child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "common/clock.h"
#include "launcher/process.h"

namespace gyre::app {

ChildRun runLoggedChild(const std::string& name, const std::vector<std::string>& argv,
                        const std::filesystem::path& log, double timeoutS) {
  const int logFd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logFd < 0) throw Error("cannot write " + log.string());
  launcher::ChildSpec spec;
  spec.name = name;
  spec.path = argv.at(0);
  spec.argv = argv;
  spec.stdoutFd = logFd;
  spec.stderrFd = logFd;
  spec.ownProcessGroup = true;  // stopping it stops its workers (and servers) too
  const auto start = Clock::now();
  launcher::SuperviseResult result;
  {
    launcher::ProcessGroup group;
    group.spawn(spec);
    ::close(logFd);
    const auto limit = std::chrono::milliseconds(static_cast<long>(timeoutS * 1000));
    result = launcher::supervise(group, -1, Deadline::after(limit), "", [](const std::string&) {});
  }
  ChildRun run;
  run.wallS = secondsSince(start);
  if (launcher::interruptSignal() != 0) throw RunFailed(name + ": " + result.error, result.exitCode);
  run.ok = result.ok;
  if (!run.ok) {
    run.error = run.wallS >= timeoutS ? fmt::format("did not finish within {} s; stopped it", timeoutS)
                                      : result.error;
    const std::string tail = logTail(log);
    if (!tail.empty()) run.error += " (log: " + tail + ")";
  }
  return run;
}

std::vector<CLI::Option*> addRunRootOptions(CLI::App& cmd, RunRootFlags& flags) {
  return {cmd.add_option("--run-root", flags.path, "Where the runs' directories go (default: a temporary directory)"),
          cmd.add_flag("--keep-runs", flags.keep,
                       "Keep the runs' directories (logs, eval.jsonl, metrics.jsonl; they are kept after a failure)")};
}

RunRoot::RunRoot(const RunRootFlags& flags, const std::string& tool)
    : path_(flags.path), tool_(tool), keep_(flags.keep) {
  temporary_ = path_.empty();
  if (temporary_) {
    std::string name = tool;
    std::replace(name.begin(), name.end(), ' ', '-');
    std::string pattern = (std::filesystem::temp_directory_path() / (name + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a temporary directory " + pattern);
    path_ = pattern;
  }
  path_ = std::filesystem::absolute(path_);
  std::error_code ec;  // a --run-root that does not exist yet is made
  std::filesystem::create_directories(path_, ec);
  if (ec) throw Error("cannot create the run root " + path_.string() + ": " + ec.message());
}

void RunRoot::done(bool failed) const {
  if (temporary_ && !keep_ && !failed) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    return;
  }
  fmt::print(stderr, "{}: the runs' directories (logs, eval.jsonl, metrics.jsonl) are in {}\n", tool_,
             path_.string());
}

std::vector<std::string> readLines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string logTail(const std::filesystem::path& log, std::size_t count) {
  std::vector<std::string> tail;
  for (const std::string& line : readLines(log))
    if (line.find_first_not_of(" \t\r") != std::string::npos) tail.push_back(line);
  if (tail.size() > count) tail.erase(tail.begin(), tail.end() - static_cast<std::ptrdiff_t>(count));
  std::string text;
  for (const std::string& line : tail) {
    if (!text.empty()) text += " | ";
    text += line;
  }
  return text;
}

}  // namespace gyre::app
