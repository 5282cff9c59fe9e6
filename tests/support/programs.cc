#include "support/programs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/ranks.h"

extern char** environ;

namespace gyre::test {
namespace {

bool isLauncherVariable(const std::string& name) {
  for (const char* prefix : {"GYRE_", "OMPI_", "PMIX_", "SLURM_", "TORCHELASTIC_"})
    if (name.starts_with(prefix)) return true;
  for (const char* exact :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    if (name == exact) return true;
  return false;
}

// What execve needs, built before fork: the child must not allocate.
struct Prepared {
  std::vector<std::string> strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  int outFd = -1;
  int errFd = -1;
};

void prepare(const ProgramSpec& spec, const std::string& dir, std::size_t index, Prepared& p) {
  if (spec.argv.empty()) throw std::invalid_argument("runPrograms: a program with an empty argv");
  p.strings = spec.argv;
  for (const auto& [name, value] : spec.env) p.strings.push_back(name + "=" + value);
  for (std::size_t i = 0; i < p.strings.size(); ++i) {
    (i < spec.argv.size() ? p.argv : p.envp).push_back(p.strings[i].data());
  }
  p.argv.push_back(nullptr);
  p.envp.push_back(nullptr);
  const std::string base = dir + "/" + std::to_string(index);
  p.outFd = ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  p.errFd = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (p.outFd < 0 || p.errFd < 0)
    throw std::runtime_error("runPrograms: cannot create output files in " + dir);
}

[[noreturn]] void execChild(const Prepared& p) {
  ::setpgid(0, 0);
  const int devNull = ::open("/dev/null", O_RDONLY);
  if (devNull < 0 || ::dup2(devNull, 0) < 0 || ::dup2(p.outFd, 1) < 0 || ::dup2(p.errFd, 2) < 0) ::_exit(126);
  ::execve(p.argv[0], p.argv.data(), p.envp.data());
  const char* what = "runPrograms: execve failed: ";
  (void)!::write(2, what, strlen(what));
  (void)!::write(2, p.argv[0], strlen(p.argv[0]));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

}  // namespace

std::string ProgramRun::describe() const {
  std::string text;
  if (timedOut) {
    text = "killed after the time-out";
  } else if (signal != 0) {
    text = "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  } else {
    text = "exited with code " + std::to_string(exitCode);
  }
  return text + "; stderr:\n" + err;
}

Environment cleanEnvironment() {
  Environment env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string entry(*p);
    const auto eq = entry.find('=');
    if (eq == std::string::npos || isLauncherVariable(entry.substr(0, eq))) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<ProgramRun> runPrograms(const std::vector<ProgramSpec>& programs, std::chrono::seconds timeout) {
  TempDir dir;
  std::vector<Prepared> prepared(programs.size());
  for (std::size_t i = 0; i < programs.size(); ++i) prepare(programs[i], dir.path(), i, prepared[i]);

  std::vector<pid_t> pids;
  for (const Prepared& p : prepared) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t started : pids) ::kill(-started, SIGKILL);
      for (pid_t started : pids) ::waitpid(started, nullptr, 0);
      throw std::runtime_error("runPrograms: fork failed");
    }
    if (pid == 0) execChild(p);
    ::setpgid(pid, pid);  // also here, so a kill(-pid) right away cannot miss the child
    pids.push_back(pid);
  }
  for (Prepared& p : prepared) ::close(p.outFd), ::close(p.errFd);

  std::vector<ProgramRun> runs(programs.size());
  std::vector<bool> done(programs.size(), false);
  std::size_t remaining = programs.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (remaining > 0) {
    const bool late = std::chrono::steady_clock::now() > deadline;
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = ::waitpid(pids[i], &status, WNOHANG);
      if (r == 0 && late) {
        ::kill(-pids[i], SIGKILL);
        runs[i].timedOut = true;
        r = ::waitpid(pids[i], &status, 0);
      }
      if (r == 0) continue;
      done[i] = true;
      --remaining;
      if (r > 0 && WIFEXITED(status)) runs[i].exitCode = WEXITSTATUS(status);
      if (r > 0 && WIFSIGNALED(status)) runs[i].signal = WTERMSIG(status);
      // Whatever the program left behind in its process group goes with it.
      ::kill(-pids[i], SIGKILL);
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].out = readFile(dir.path() + "/" + std::to_string(i) + ".out");
    runs[i].err = readFile(dir.path() + "/" + std::to_string(i) + ".err");
  }
  return runs;
}

ProgramRun runProgram(const ProgramSpec& program, std::chrono::seconds timeout) {
  return runPrograms({program}, timeout).front();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::future<ProgramRun> startProgram(ProgramSpec program, std::chrono::seconds timeout) {
  return std::async(std::launch::async,
                    [program = std::move(program), timeout] { return runProgram(program, timeout); });
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  if (fd >= 0) ::close(fd);
  if (port == 0) throw std::runtime_error("freePort: cannot bind a socket on 127.0.0.1");
  return port;
}

}  // namespace gyre::test
