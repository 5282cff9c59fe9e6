#include "launcher/agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "common/auth.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/socket.h"
#include "launcher/agent_protocol.h"
#include "launcher/line_reader.h"
#include "launcher/process.h"
#include "rendezvous/tcp_store_protocol.h"

namespace gyre::launcher {
namespace {

constexpr int kAgentPollMs = 50;

Event makeEvent(Event::Kind kind, std::string text = "") {
  Event e;
  e.kind = kind;
  e.text = std::move(text);
  return e;
}

std::string errnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Children this process adopted as a subreaper: descendants whose parent died (a worker's own
// children, left behind). Read from /proc; `known` are the workers themselves.
std::vector<pid_t> adoptedChildren(const std::vector<pid_t>& known) {
  std::vector<pid_t> found;
  const pid_t self = getpid();
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return found;
  while (const dirent* entry = readdir(dir)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || std::find(known.begin(), known.end(), pid) != known.end()) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...; comm may hold spaces and parentheses, so parse after the last ')'.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
      found.push_back(pid);
  }
  closedir(dir);
  return found;
}

// Starts a TCP connection to every "host:port" at once and returns the index of the first to
// connect (its socket in `out`), or -1 when none did before `until`. Why each failed goes to
// `errors`.
int firstToConnect(const std::vector<std::string>& candidates, Deadline until,
                   std::vector<std::string>& errors, net::Fd& out) {
  std::vector<net::Fd> fds(candidates.size());
  std::vector<pollfd> waiting;
  std::vector<int> index;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    try {
      const auto [host, port] = net::splitHostPort(candidates[i]);
      addrinfo hints{};
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* list = nullptr;
      const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
      if (rc != 0) {
        errors[i] = gai_strerror(rc);
        continue;
      }
      std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(list, freeaddrinfo);
      fds[i] = net::Fd(::socket(list->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fds[i].valid()) {
        errors[i] = errnoText("socket");
        continue;
      }
      if (::connect(fds[i].get(), list->ai_addr, list->ai_addrlen) != 0 && errno != EINPROGRESS) {
        errors[i] = std::strerror(errno);
        fds[i] = net::Fd();
        continue;
      }
      waiting.push_back({fds[i].get(), POLLOUT, 0});
      index.push_back(static_cast<int>(i));
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  }
  while (!waiting.empty() && !until.expired()) {
    if (poll(waiting.data(), waiting.size(), std::max(1, until.remainingMs())) <= 0) continue;
    for (std::size_t k = 0; k < waiting.size();) {
      if (waiting[k].revents == 0) {
        ++k;
        continue;
      }
      const int i = index[k];
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(fds[i].get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) {
        net::setNonBlocking(fds[i].get(), false);
        out = std::move(fds[i]);
        return i;
      }
      errors[i] = std::strerror(error);
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(k));
      index.erase(index.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return -1;
}

class Agent {
 public:
  Agent(int inFd, int outFd) : in_(inFd), out_(outFd) {}

  int run() {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    signal(SIGPIPE, SIG_IGN);
    installInterruptHandlers();
    net::setNonBlocking(in_, true);
    net::setNonBlocking(out_, false);
    if (!readSpec()) return 1;
    const std::optional<std::string> store = reachStore();
    if (!store) return 1;
    send(makeEvent(Event::Kind::kStore, *store));
    if (!startWorkers(*store)) {
      stopWorkers(SIGKILL);
      return 1;
    }
    supervise();
    send(makeEvent(Event::Kind::kDone));
    return 0;
  }

 private:
  struct Worker {
    int rank = 0;
    pid_t pid = 0;
    Clock::time_point start;
    net::Fd out, err;
    LineReader outLines{true}, errLines{true};
    bool exited = false;
  };

  // Writes one event; a launcher that is gone means stop.
  void send(const Event& event) {
    if (launcherGone_) return;
    const std::string line = encodeEvent(event) + "\n";
    try {
      writeFully(out_, line, Deadline::never());
    } catch (const std::exception&) {
      launcherGone_ = true;
      stopping_ = true;
    }
  }

  void sendOutput(int rank, bool fromStderr, const std::string& text, char terminator) {
    Event e = makeEvent(Event::Kind::kOutput, text);
    e.rank = rank, e.fromStderr = fromStderr, e.terminator = terminator;
    send(e);
  }

  void fail(const std::string& why) { send(makeEvent(Event::Kind::kFailed, why)); }

  bool runsServers() const { return !spec_.serverIndices.empty(); }
  // The rank (or, for parameter servers, the server index) of this agent's i-th process.
  int rankOf(int i) const { return runsServers() ? spec_.serverIndices[i] : spec_.firstRank + i; }
  std::string nameOf(int rank) const {
    return (runsServers() ? "ps server " : "rank ") + std::to_string(rank);
  }

  bool readSpec() {
    std::optional<std::string> line;
    LineReader reader;
    const Deadline deadline = Deadline::after(std::chrono::seconds(60));
    bool open = true;
    while (!line && open && !deadline.expired() && interruptSignal() == 0) {
      pollfd p{in_, POLLIN, 0};
      if (poll(&p, 1, kAgentPollMs) <= 0) continue;
      open = reader.readFrom(in_, [&](const std::string& text, char) {
        if (!line) line = text;
      });
    }
    if (!line) {
      fail("the agent got no job description from the launcher");
      return false;
    }
    try {
      spec_ = decodeSpec(*line);
    } catch (const Error& e) {
      fail(e.what());
      return false;
    }
    return true;
  }

  // Reads launcher commands; returns false once the launcher asked to stop or went away.
  bool launcherWantsUs() {
    bool open = true;
    bool stop = false;
    while (open) {
      pollfd p{in_, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) break;
      open = commands_.readFrom(in_, [&](const std::string& text, char) { stop |= text == "stop"; });
    }
    return open && !stop;
  }

  // The first candidate address of the job's store that answers and accepts the secret. All
  // candidates are tried at once, in rounds, until the start-up time-out: an address this host
  // cannot route to costs nothing, and a silent one costs at most a round.
  std::optional<std::string> reachStore() {
    const Deadline deadline = Deadline::after(std::chrono::milliseconds(spec_.startTimeoutMs));
    // An etcd cluster (gyre run --rdzv): its client tries every member until the time-out.
    if (spec_.storeCandidates.size() == 1 && spec_.storeCandidates[0].starts_with("etcd://")) {
      try {
        connectEtcdStore(spec_.storeCandidates[0], std::chrono::milliseconds(spec_.startTimeoutMs));
        return spec_.storeCandidates[0];
      } catch (const Error& e) {
        fail("host " + spec_.host + " (" + net::hostName() + ") could not reach the job's etcd: " + e.what());
        return std::nullopt;
      }
    }
    std::vector<std::string> errors(spec_.storeCandidates.size(), "no answer");
    while (true) {
      if (interruptSignal() != 0 || !launcherWantsUs()) return std::nullopt;
      const Deadline round(std::min(deadline.at(), Clock::now() + std::chrono::seconds(1)));
      net::Fd fd;
      const int winner = firstToConnect(spec_.storeCandidates, round, errors, fd);
      if (winner >= 0) {
        try {
          auth::handshakeAsClient(fd.get(), spec_.secret, rendezvous::kStoreAuthContext,
                                  Deadline(std::min(deadline.at(), Clock::now() + std::chrono::seconds(5))));
          return spec_.storeCandidates[winner];
        } catch (const std::exception& e) {
          errors[winner] = std::string("handshake failed: ") + e.what();
        }
      }
      if (deadline.expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::clamp(deadline.remainingMs(), 0, 100)));
    }
    std::string tried;
    for (std::size_t i = 0; i < errors.size(); ++i)
      tried += (i == 0 ? "" : "; ") + spec_.storeCandidates[i] + " (" + errors[i] + ")";
    fail("host " + spec_.host + " (" + net::hostName() + ") could not reach the job's store within " +
         numbers::format(spec_.startTimeoutMs / 1000.0) + " s (--start-timeout); tried " + tried);
    return std::nullopt;
  }

  // A parameter server gets the job's store, secret and interface, and its index; no rank.
  std::vector<std::pair<std::string, std::string>> serverEnvironment(int localIndex,
                                                                     const std::string& store) {
    std::vector<std::pair<std::string, std::string>> env = spec_.env;
    env.insert(env.end(), {{"GYRE_PS_SERVER_INDEX", std::to_string(rankOf(localIndex))},
                           {"GYRE_PS_SERVERS", std::to_string(spec_.psServers)}});
    addJobEnvironment(env, store);
    return env;
  }

  // What every process of the job gets: the store, the secret, the job and its generation.
  void addJobEnvironment(std::vector<std::pair<std::string, std::string>>& env, const std::string& store) {
    env.insert(env.end(), {{"GYRE_STORE_ADDR", store},
                           {"GYRE_SECRET", spec_.secret},
                           {"GYRE_JOB_ID", spec_.jobId},
                           {"GYRE_START_TIMEOUT_MS", std::to_string(spec_.startTimeoutMs)},
                           {"GYRE_RESTART_COUNT", std::to_string(spec_.restartCount)},
                           {"GYRE_MAX_RESTARTS", std::to_string(spec_.maxRestarts)}});
    if (!spec_.interface.empty()) env.emplace_back("GYRE_IFACE", spec_.interface);
  }

  std::vector<std::pair<std::string, std::string>> workerEnvironment(int localRank,
                                                                     const std::string& store) {
    if (runsServers()) return serverEnvironment(localRank, store);
    std::vector<std::pair<std::string, std::string>> env = spec_.env;
    auto userSet = [&](const std::string& name) {
      for (const auto& [k, v] : env)
        if (k == name) return true;
      return std::getenv(name.c_str()) != nullptr;
    };
    const int sharing = spec_.coreShare > 0 ? spec_.coreShare : spec_.count;
    ThreadEnv threadEnv = threadEnvironment(spec_.threads, usableCores(), sharing, userSet);
    for (auto& kv : threadEnv.env) env.push_back(std::move(kv));
    const int rank = spec_.firstRank + localRank;
    env.insert(env.end(), {{"GYRE_RANK", std::to_string(rank)},
                           {"GYRE_WORLD_SIZE", std::to_string(spec_.worldSize)},
                           {"GYRE_LOCAL_RANK", std::to_string(localRank)},
                           {"GYRE_LOCAL_SIZE", std::to_string(spec_.count)}});
    addJobEnvironment(env, store);
    if (spec_.psServers > 0) env.emplace_back("GYRE_PS_SERVERS", std::to_string(spec_.psServers));
    return env;
  }

  // What a process must not inherit from the agent's own environment: the other role's variables.
  std::vector<std::string> unsetEnvironment() const {
    if (runsServers()) return {"GYRE_RANK", "GYRE_WORLD_SIZE", "GYRE_LOCAL_RANK", "GYRE_LOCAL_SIZE"};
    if (spec_.psServers > 0) return {"GYRE_PS_SERVER_INDEX"};
    return {"GYRE_PS_SERVER_INDEX", "GYRE_PS_SERVERS"};
  }

  bool startWorkers(const std::string& store) {
    // Parameter servers are this executable (`gyre ps-server`), whatever its path on this host.
    const std::string path = runsServers() ? selfExecutable() : findExecutable(spec_.program[0]);
    if (path.empty()) {
      fail("host " + spec_.host + ": cannot find the program '" + spec_.program[0] +
           (spec_.program[0].find('/') == std::string::npos ? "' in PATH" : "' (or it is not executable)"));
      return false;
    }
    net::Fd devNull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    for (int i = 0; i < spec_.count; ++i) {
      auto w = std::make_unique<Worker>();
      w->rank = rankOf(i);
      int outPipe[2], errPipe[2];
      if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0) {
        fail("host " + spec_.host + ": " + errnoText("pipe2"));
        return false;
      }
      w->out = net::Fd(outPipe[0]);
      w->err = net::Fd(errPipe[0]);
      net::Fd outWrite(outPipe[1]), errWrite(errPipe[1]);
      ChildSpec child;
      child.name = nameOf(w->rank);
      child.path = path;
      child.argv = runsServers() ? std::vector<std::string>{"gyre", "ps-server"} : spec_.program;
      child.env = workerEnvironment(i, store);
      child.unsetEnv = unsetEnvironment();
      child.stdinFd = devNull.get();
      child.stdoutFd = outWrite.get();
      child.stderrFd = errWrite.get();
      child.ownProcessGroup = true;  // stopped as a group, with anything it starts
      try {
        w->pid = group_.spawn(child);
      } catch (const Error& e) {
        fail("host " + spec_.host + ": cannot start " + nameOf(w->rank) + ": " + e.what());
        return false;
      }
      w->start = Clock::now();
      net::setNonBlocking(w->out.get(), true);
      net::setNonBlocking(w->err.get(), true);
      Event started = makeEvent(Event::Kind::kStarted);
      started.rank = w->rank, started.pid = w->pid;
      send(started);
      workers_.push_back(std::move(w));
    }
    return true;
  }

  void relay(Worker& w, net::Fd& fd, LineReader& lines, bool fromStderr) {
    if (!fd.valid()) return;
    const bool open = lines.readFrom(fd.get(), [&](const std::string& text, char terminator) {
      sendOutput(w.rank, fromStderr, text, terminator);
    });
    if (!open) fd = net::Fd();
  }

  void stopWorkers(int sig) {
    group_.signalAll(sig);
    std::vector<pid_t> known;
    for (const auto& w : workers_) known.push_back(w->pid);
    for (pid_t pid : adoptedChildren(known)) kill(pid, sig);
  }

  // Reaps the adopted orphans that have exited, so they do not linger as zombies.
  void reapAdopted() {
    std::vector<pid_t> known;
    for (const auto& w : workers_) known.push_back(w->pid);
    for (pid_t pid : adoptedChildren(known)) waitpid(pid, nullptr, WNOHANG);
  }

  void supervise() {
    std::optional<Deadline> killAt;
    Deadline nextReap = Deadline::after(std::chrono::milliseconds(500));
    while (true) {
      std::vector<pollfd> fds{{in_, POLLIN, 0}};
      for (const auto& w : workers_) {
        if (w->out.valid()) fds.push_back({w->out.get(), POLLIN, 0});
        if (w->err.valid()) fds.push_back({w->err.get(), POLLIN, 0});
      }
      poll(fds.data(), fds.size(), kAgentPollMs);
      for (auto& w : workers_) {
        relay(*w, w->out, w->outLines, false);
        relay(*w, w->err, w->errLines, true);
      }
      if (!stopping_ && (interruptSignal() != 0 || !launcherWantsUs())) stopping_ = true;
      if (stopping_ && !killAt) {
        stopWorkers(SIGTERM);
        killAt = Deadline::after(std::chrono::milliseconds(spec_.stopGraceMs));
      }
      if (killAt && killAt->expired()) stopWorkers(SIGKILL);

      for (const ChildExit& e : group_.reap()) {
        auto it =
            std::find_if(workers_.begin(), workers_.end(), [&](const auto& w) { return w->pid == e.pid; });
        if (it == workers_.end()) continue;
        Worker& w = **it;
        w.exited = true;
        // What the worker wrote before it ended comes before its exit.
        relay(w, w.out, w.outLines, false);
        relay(w, w.err, w.errLines, true);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - w.start).count();
        Event exit = makeEvent(Event::Kind::kExit);
        exit.rank = w.rank, exit.code = e.code, exit.signal = e.signal, exit.elapsedMs = ms;
        send(exit);
      }
      if (nextReap.expired()) {
        reapAdopted();
        nextReap = Deadline::after(std::chrono::milliseconds(500));
      }
      if (group_.empty()) break;
    }
    // Every worker is gone; whatever they left running goes too, so no orphan survives the job.
    finishStragglers();
  }

  void finishStragglers() {
    std::vector<pid_t> known;
    for (const auto& w : workers_) known.push_back(w->pid);
    std::vector<pid_t> left = adoptedChildren(known);
    for (pid_t pid : left) kill(pid, SIGKILL);
    for (pid_t pid : left) waitpid(pid, nullptr, 0);
    for (auto& w : workers_) {
      // Flush output that arrived after the exit; descriptors still held by killed stragglers
      // are closed now.
      relay(*w, w->out, w->outLines, false);
      relay(*w, w->err, w->errLines, true);
      const auto flush = [&](LineReader& lines, bool fromStderr) {
        lines.flush([&](const std::string& text, char terminator) {
          sendOutput(w->rank, fromStderr, text, terminator);
        });
      };
      flush(w->outLines, false);
      flush(w->errLines, true);
    }
  }

  int in_;
  int out_;
  AgentSpec spec_;
  LineReader commands_;
  ProcessGroup group_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopping_ = false;
  bool launcherGone_ = false;
};

}  // namespace

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

ThreadEnv threadEnvironment(int threads, int cores, int localWorkers,
                            const std::function<bool(const std::string&)>& isSet) {
  ThreadEnv t;
  t.threads = threads > 0 ? threads : std::max(1, cores / std::max(1, localWorkers));
  const std::string value = std::to_string(t.threads);
  t.env.emplace_back("GYRE_NUM_THREADS", value);
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    if (!isSet(name)) t.env.emplace_back(name, value);
  return t;
}

int runAgent(int inFd, int outFd) {
  return Agent(inFd, outFd).run();
}

}  // namespace gyre::launcher
