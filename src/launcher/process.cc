#include "launcher/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "gyre/errors.h"
#include "launcher/line_reader.h"

extern char** environ;

namespace gyre::launcher {
namespace {

volatile std::sig_atomic_t gInterrupt = 0;

[[noreturn]] void throwErrno(const std::string& what) {
  throw SystemError(what + ": " + std::strerror(errno));
}

void onInterrupt(int sig) {
  gInterrupt = sig;
}

}  // namespace

std::string ChildExit::describe() const {
  if (signal != 0) {
    const char* text = strsignal(signal);
    return name + " was killed by signal " + std::to_string(signal) + " (" + (text ? text : "?") + ")";
  }
  if (code == 127) return name + " exited with code 127 (the program could not be started)";
  return name + " exited with code " + std::to_string(code);
}

ProcessGroup::~ProcessGroup() {
  stopAll(std::chrono::milliseconds(500));
}

pid_t ProcessGroup::spawn(const ChildSpec& spec) {
  // Everything the child needs is prepared before fork: the tool has threads (the store server),
  // so the child may only make async-signal-safe calls until it execs.
  std::vector<std::string> argvStrings = spec.argv;
  std::vector<std::string> envStrings = environmentWith(spec.env, spec.unsetEnv);
  std::vector<char*> argv = execPointers(argvStrings);
  std::vector<char*> envp = execPointers(envStrings);
  const std::string failure = "gyre: cannot execute " + spec.path + " for " + spec.name + "\n";
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) throwErrno("fork");
  if (pid == 0) {
    if (spec.ownProcessGroup) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (spec.stdinFd >= 0 && dup2(spec.stdinFd, STDIN_FILENO) < 0) _exit(127);
    if (spec.stdoutFd >= 0 && dup2(spec.stdoutFd, STDOUT_FILENO) < 0) _exit(127);
    if (spec.stderrFd >= 0 && dup2(spec.stderrFd, STDERR_FILENO) < 0) _exit(127);
    // The tool ignores or catches some signals; the program starts with the defaults.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    if (spec.keepFd >= 0) fcntl(spec.keepFd, F_SETFD, 0);
    execve(spec.path.c_str(), argv.data(), envp.data());
    [[maybe_unused]] auto n = write(STDERR_FILENO, failure.data(), failure.size());
    _exit(127);
  }
  if (spec.ownProcessGroup) setpgid(pid, pid);
  running_.push_back({spec.name, pid, spec.ownProcessGroup});
  return pid;
}

std::vector<ChildExit> ProcessGroup::reap() {
  std::vector<ChildExit> exits;
  for (auto it = running_.begin(); it != running_.end();) {
    int status = 0;
    const pid_t r = waitpid(it->pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
      ++it;
      continue;
    }
    ChildExit e;
    e.name = it->name;
    e.pid = it->pid;
    if (r > 0 && WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    if (r > 0 && WIFEXITED(status)) e.code = WEXITSTATUS(status);
    exits.push_back(e);
    it = running_.erase(it);
  }
  return exits;
}

std::vector<std::string> ProcessGroup::runningNames() const {
  std::vector<std::string> names;
  for (const auto& c : running_) names.push_back(c.name);
  return names;
}

void ProcessGroup::signalAll(int sig) {
  for (const auto& c : running_) kill(c.group ? -c.pid : c.pid, sig);
}

void ProcessGroup::stopAll(std::chrono::milliseconds grace) {
  if (running_.empty()) return;
  signalAll(SIGTERM);
  const Deadline deadline = Deadline::after(grace);
  while (!running_.empty() && !deadline.expired()) {
    reap();
    if (!running_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  signalAll(SIGKILL);
  for (const auto& c : running_) {
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  running_.clear();
}

void installInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

int interruptSignal() {
  return gInterrupt;
}

SuperviseResult supervise(ProcessGroup& group, int lineFd, Deadline deadline, const std::string& what,
                          const std::function<void(const std::string&)>& onLine) {
  const std::string prefix = what.empty() ? "" : what + ": ";
  LineReader lines;
  bool open = lineFd >= 0;
  auto fail = [&](std::string error, int code) {
    group.stopAll();
    return SuperviseResult{false, std::move(error), code};
  };
  // Reads what is available (waiting up to waitMs); false once the descriptor is at its end.
  auto pump = [&](int waitMs) {
    pollfd p{lineFd, POLLIN, 0};
    const int n = poll(open ? &p : nullptr, open ? 1 : 0, waitMs);
    if (n <= 0 || !open) return open;
    return lines.readFrom(lineFd, [&](const std::string& line, char) { onLine(line); });
  };

  try {
    while (true) {
      if (int sig = interruptSignal()) {
        return fail(prefix + "interrupted by signal " + std::to_string(sig) + "; stopped every child",
                    128 + sig);
      }
      open = pump(50);
      // Several children may have ended since the last look: name every failure, the ones a
      // signal killed first (they are usually the cause, the others lost them as a peer).
      std::vector<ChildExit> failures;
      for (const ChildExit& e : group.reap())
        if (!e.ok()) failures.push_back(e);
      if (!failures.empty()) {
        std::stable_partition(failures.begin(), failures.end(),
                              [](const ChildExit& e) { return e.signal != 0; });
        std::string text;
        for (const ChildExit& e : failures) text += (text.empty() ? "" : "; ") + e.describe();
        return fail(prefix + text + (group.empty() ? "" : "; stopped the others"), 1);
      }
      if (group.empty()) {
        const Deadline drain = Deadline::after(std::chrono::seconds(2));
        while (open && !drain.expired()) open = pump(50);
        return {};
      }
      if (deadline.expired()) {
        std::string names;
        for (const auto& n : group.runningNames()) names += (names.empty() ? "" : ", ") + n;
        return fail(prefix + "timed out (--timeout); still running and now stopped: " + names, 1);
      }
    }
  } catch (const std::exception& e) {
    return fail(prefix + e.what(), 1);
  }
}

std::vector<std::string> environmentWith(const std::vector<std::pair<std::string, std::string>>& set,
                                         const std::vector<std::string>& unset) {
  auto replaced = [&](std::string_view key) {
    for (const auto& [k, v] : set)
      if (k == key) return true;
    return std::find(unset.begin(), unset.end(), key) != unset.end();
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    if (!replaced(entry.substr(0, entry.find('=')))) env.emplace_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> execPointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string findExecutable(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string candidate =
        (colon == start ? std::string(".") : dirs.substr(start, colon - start)) + "/" + name;
    if (executable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

std::string selfExecutable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throwErrno("readlink /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace gyre::launcher
