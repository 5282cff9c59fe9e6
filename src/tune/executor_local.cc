// The local executor: each run is a child process group on this host; the end of any run wakes
// wait() at once (a pidfd per run), so short trials do not wait for a polling interval.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "common/clock.h"
#include "gyre/errors.h"
#include "launcher/process.h"
#include "tune/executor.h"

namespace gyre::tune {

std::string RunEnd::describe() const {
  if (signal != 0) return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exited with code " + std::to_string(code);
}

namespace {

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(int slots) : slots_(slots) {}
  ~LocalExecutor() override { stopAll(); }

  std::string describe() const override {
    return "local, " + std::to_string(slots_) + " slot" + (slots_ == 1 ? "" : "s");
  }
  int capacity() const override { return slots_; }
  int freeSlots() const override {
    int used = 0;
    for (const auto& [trial, run] : runs_) used += run->slots;
    return slots_ - used;
  }

  std::string start(const RunSpec& spec) override {
    auto run = std::make_unique<Run>();
    run->slots = spec.slots;
    run->started = Clock::now();
    const int log = ::open(spec.logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0) throw SystemError("cannot open " + spec.logPath + ": " + std::strerror(errno));
    launcher::ChildSpec child;
    child.name = "trial " + std::to_string(spec.trial);
    const std::string path = launcher::findExecutable(spec.argv.at(0));
    child.path = path.empty() ? spec.argv[0] : path;
    child.argv = spec.argv;
    child.env = spec.env;
    child.stdoutFd = log;
    child.stderrFd = log;
    child.stdinFd = devNull();
    child.ownProcessGroup = true;
    try {
      run->pid = run->group.spawn(child);
    } catch (...) {
      ::close(log);
      throw;
    }
    ::close(log);
    run->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, run->pid, 0));
    runs_[spec.trial] = std::move(run);
    return "localhost";
  }

  void stop(int trial, std::chrono::milliseconds grace) override {
    auto it = runs_.find(trial);
    if (it == runs_.end() || it->second->stopping) return;
    it->second->stopping = true;
    it->second->killAt = Deadline::after(grace);
    it->second->group.signalAll(SIGTERM);
  }

  std::vector<RunEnd> wait(std::chrono::milliseconds timeout) override {
    std::vector<RunEnd> ended = reap();
    if (!ended.empty() || runs_.empty()) {
      if (runs_.empty() && ended.empty()) ::poll(nullptr, 0, static_cast<int>(timeout.count()));
      return ended;
    }
    std::vector<pollfd> fds;
    for (const auto& [trial, run] : runs_)
      if (run->pidfd >= 0) fds.push_back({run->pidfd, POLLIN, 0});
    // Without pidfds (an old kernel), look again every 10 ms.
    const bool all = fds.size() == runs_.size();
    ::poll(fds.data(), fds.size(),
           static_cast<int>(all ? timeout.count() : std::min<long>(10, timeout.count())));
    return reap();
  }

  void stopAll() override {
    for (auto& [trial, run] : runs_) run->group.stopAll(std::chrono::milliseconds(2000));
    for (auto& [trial, run] : runs_)
      if (run->pidfd >= 0) ::close(run->pidfd);
    runs_.clear();
  }

 private:
  struct Run {
    launcher::ProcessGroup group;
    pid_t pid = 0;
    int pidfd = -1;
    int slots = 1;
    Clock::time_point started;
    bool stopping = false;
    Deadline killAt = Deadline::never();
  };

  static int devNull() {
    static const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
  }

  std::vector<RunEnd> reap() {
    std::vector<RunEnd> ended;
    for (auto it = runs_.begin(); it != runs_.end();) {
      Run& run = *it->second;
      if (run.stopping && run.killAt.expired()) run.group.signalAll(SIGKILL);
      const std::vector<launcher::ChildExit> exits = run.group.reap();
      if (exits.empty()) {
        ++it;
        continue;
      }
      // The run's leader ended: whatever it left in its process group goes with it.
      ::kill(-run.pid, SIGKILL);
      RunEnd e;
      e.trial = it->first;
      e.code = exits.front().code;
      e.signal = exits.front().signal;
      e.seconds = std::chrono::duration<double>(Clock::now() - run.started).count();
      e.stopped = run.stopping;
      ended.push_back(e);
      if (run.pidfd >= 0) ::close(run.pidfd);
      it = runs_.erase(it);
    }
    return ended;
  }

  int slots_;
  std::map<int, std::unique_ptr<Run>> runs_;
};

}  // namespace

std::unique_ptr<Executor> makeLocalExecutor(int slots) {
  if (slots < 1) throw InvalidArgument("--slots must be at least 1; got " + std::to_string(slots));
  return std::make_unique<LocalExecutor>(slots);
}

}  // namespace gyre::tune
