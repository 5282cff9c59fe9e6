#include "launcher/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/socket.h"
#include "gyre/errors.h"
#include "launcher/process.h"

namespace gyre::launcher {
namespace {

// posix_spawn's attribute and file-action objects, destroyed on scope exit.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

std::string describeEnd(const CommandResult& r, const std::string& name, long timeoutMs) {
  if (r.timedOut) return name + " did not finish within " + std::to_string(timeoutMs) + " ms and was killed";
  if (r.signal != 0) {
    const char* text = strsignal(r.signal);
    return name + " was killed by signal " + std::to_string(r.signal) + " (" + (text ? text : "?") + ")";
  }
  if (r.exitCode != 0) return name + " exited with code " + std::to_string(r.exitCode);
  return "";
}

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) throw InvalidArgument("runCommand: empty argv");
  CommandResult result;
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) throw SystemError(std::string("pipe2: ") + std::strerror(errno));
  net::Fd readEnd(pipeFds[0]);
  net::Fd writeEnd(pipeFds[1]);

  std::vector<std::string> argStrings = argv;
  std::vector<std::string> envStrings = launcher::environmentWith(options.setEnv, options.unsetEnv);
  std::vector<char*> args = launcher::execPointers(argStrings);
  std::vector<char*> envp = launcher::execPointers(envStrings);

  SpawnSetup setup;
  // Its own process group, so that the time-out kills whatever it started too; default signal
  // dispositions and an empty mask whatever this process has.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, writeEnd.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, writeEnd.get(), STDERR_FILENO);

  const Deadline deadline = Deadline::after(options.timeout);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &setup.actions, &setup.attr, args.data(), envp.data());
  writeEnd.reset();
  if (rc != 0) {
    result.error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  result.started = true;

  bool open = true;
  bool exited = false;
  int status = 0;
  std::array<char, 8192> chunk;
  // Once the command has exited, whatever it started may still hold the pipe: read what is
  // there for a moment more, then stop.
  Deadline drain = deadline;
  while (true) {
    if (!exited) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
        drain = Deadline::after(std::chrono::milliseconds(200));
      }
    }
    if (exited && (!open || drain.expired())) break;
    if (deadline.expired()) {
      if (!exited) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        result.timedOut = true;
      }
      break;
    }
    if (!open) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    pollfd p{readEnd.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::read(readEnd.get(), chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      open = false;
      continue;
    }
    const std::size_t room = options.maxOutputBytes - std::min(options.maxOutputBytes, result.output.size());
    result.output.append(chunk.data(), std::min(room, static_cast<std::size_t>(n)));
  }
  // Whatever it left running in its group (a background child holding the pipe) goes with it.
  ::kill(-pid, SIGKILL);
  if (!result.timedOut) {
    if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  result.error = describeEnd(result, argv[0], static_cast<long>(options.timeout.count()));
  return result;
}

}  // namespace gyre::launcher
