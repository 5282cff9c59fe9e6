// The local executor: each run is a child process group on this host; the end of any run wakes
// wait() at once (a pidfd per run), so short trials do not wait for a polling interval.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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

// A host's slots. `remote`: reached through gyre run -H; otherwise this host.
struct Node {
  std::string name;
  int slots = 1;
  int used = 0;
  bool remote = false;
};

class SlotExecutor final : public Executor {
 public:
  SlotExecutor(std::vector<Node> nodes, std::string gyre, std::string rshAgent)
      : nodes_(std::move(nodes)), gyre_(std::move(gyre)), rshAgent_(std::move(rshAgent)) {}
  ~SlotExecutor() override { stopAll(); }

  std::string describe() const override {
    if (nodes_.size() == 1 && !nodes_[0].remote)
      return fmt::format("local, {} slot{}", nodes_[0].slots, nodes_[0].slots == 1 ? "" : "s");
    std::string s = "hosts";
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      s += fmt::format("{}{}:{}", i == 0 ? " " : ",", nodes_[i].name, nodes_[i].slots);
    return s;
  }
  int capacity() const override {
    int total = 0;
    for (const Node& n : nodes_) total += n.slots;
    return total;
  }
  // The most one run can have now: a run does not span hosts.
  int freeSlots() const override {
    int most = 0;
    for (const Node& n : nodes_) most = std::max(most, n.slots - n.used);
    return most;
  }

  std::string start(const RunSpec& given) override {
    Node* node = nullptr;
    for (Node& n : nodes_)
      if (n.slots - n.used >= given.slots && (node == nullptr || n.slots - n.used > node->slots - node->used))
        node = &n;
    if (node == nullptr) throw Error(fmt::format("no host has {} free slots", given.slots));
    const RunSpec spec = wrapped(given, *node);
    auto run = std::make_unique<Run>();
    run->slots = given.slots;
    run->node = node;
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
    node->used += run->slots;
    runs_[spec.trial] = std::move(run);
    return node->name;
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

  // SIGTERM to every run's process group at once, up to 2 s for them to end, then SIGKILL to
  // whatever is left of each group.
  void stopAll() override {
    for (auto& [trial, run] : runs_) run->group.signalAll(SIGTERM);
    const Deadline deadline = Deadline::after(std::chrono::milliseconds(2000));
    while (!deadline.expired()) {
      bool alive = false;
      for (auto& [trial, run] : runs_) {
        run->group.reap();
        alive |= !run->group.empty();
      }
      if (!alive) break;
      ::poll(nullptr, 0, 10);
    }
    for (auto& [trial, run] : runs_) {
      run->group.stopAll(std::chrono::milliseconds(0));
      ::kill(-run->pid, SIGKILL);
      if (run->pidfd >= 0) ::close(run->pidfd);
      run->node->used -= run->slots;
    }
    runs_.clear();
  }

  // The run as it is started on `node`: a command of several workers, or any run on another host,
  // becomes a gyre job (gyre run), which passes the trial's variables on with -x.
  RunSpec wrapped(const RunSpec& spec, const Node& node) const {
    const int np = spec.startsItsWorkers ? 1 : spec.slots;
    if (!node.remote && np == 1) return spec;
    RunSpec run = spec;
    run.argv = {gyre_, "run", "--np", std::to_string(np), "--no-tag-output"};
    if (node.remote) {
      for (const std::string& w :
           {std::string("-H"), node.name + ":" + std::to_string(np), std::string("--rsh-agent"), rshAgent_})
        run.argv.push_back(w);
      for (const auto& [name, value] : spec.env) {
        run.argv.push_back("-x");
        run.argv.push_back(name + "=" + value);
      }
    }
    run.argv.push_back("--");
    run.argv.insert(run.argv.end(), spec.argv.begin(), spec.argv.end());
    return run;
  }

  struct Run {
    Node* node = nullptr;
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
      run.node->used -= run.slots;
      it = runs_.erase(it);
    }
    return ended;
  }

  std::vector<Node> nodes_;
  std::string gyre_;
  std::string rshAgent_;
  std::map<int, std::unique_ptr<Run>> runs_;
};

}  // namespace

std::unique_ptr<Executor> makeLocalExecutor(int slots, const std::string& gyre) {
  if (slots < 1) throw InvalidArgument("--slots must be at least 1; got " + std::to_string(slots));
  return std::make_unique<SlotExecutor>(std::vector<Node>{{"localhost", slots, 0, false}}, gyre, "");
}

std::unique_ptr<Executor> makeHostsExecutor(std::vector<launcher::HostSlots> hosts, const std::string& gyre,
                                            const std::string& rshAgent) {
  if (hosts.empty()) throw InvalidArgument("-H: no hosts");
  std::vector<Node> nodes;
  for (const launcher::HostSlots& h : hosts) {
    if (h.slots < 1) throw InvalidArgument("-H " + h.name + ": a host needs at least 1 slot");
    nodes.push_back({h.name, h.slots, 0, true});
  }
  return std::make_unique<SlotExecutor>(std::move(nodes), gyre, rshAgent);
}

}  // namespace gyre::tune
