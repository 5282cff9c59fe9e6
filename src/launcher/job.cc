#include "launcher/job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "common/auth.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/socket.h"
#include "gyre/init.h"
#include "gyre/store.h"
#include "launcher/agent_protocol.h"
#include "launcher/line_reader.h"
#include "launcher/output.h"
#include "launcher/process.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;

// Failures that arrive this soon after the first are weighed together: a worker killed by a
// signal is reported before the peers that failed because they lost it.
constexpr Ms kFailureWindow{200};
constexpr int kPollMs = 50;

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f" : "%.0f", s);
  return text;
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  return (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig)) +
         (text ? std::string(" (") + text + ")" : "");
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

struct RankState {
  bool started = false;
  bool exited = false;
  int code = 0;
  int signal = 0;
  std::int64_t elapsedMs = 0;
};

struct Failure {
  int rank = -1;  // -1: not a worker (an agent, the launcher)
  std::string message;
  int exitCode = 1;
  bool bySignal = false;
};

struct AgentHandle {
  HostPlacement place;
  std::string command;  // how it was started, for messages
  pid_t pid = 0;
  net::Fd toAgent;
  net::Fd fromAgent;
  LineReader lines;
  bool exited = false;
  bool done = false;  // sent kDone: every worker reported
  ChildExit exit;
};

class Job {
 public:
  explicit Job(const RunOptions& o) : o_(o) {}

  int run() {
    signal(SIGPIPE, SIG_IGN);
    installInterruptHandlers();
    place();
    const bool tag = o_.tagOutput.value_or(worldSize_ > 1);
    output_ = std::make_unique<OutputSink>(worldSize_, tag, o_.outputDir);
    ranks_.assign(worldSize_, RankState{});
    startStore();
    for (const HostPlacement& p : placement_) startAgent(p);
    supervise();
    output_->flush();
    return report();
  }

 private:
  void place() {
    std::vector<HostSlots> hosts = o_.hosts;
    if (hosts.empty()) hosts.push_back({"localhost", std::max(1, o_.np)});
    placement_ = placeRanks(hosts, o_.np);
    worldSize_ = 0;
    for (const auto& p : placement_) worldSize_ += p.count;
  }

  bool anyRemote() const {
    return std::any_of(placement_.begin(), placement_.end(), [](const auto& p) { return !p.local; });
  }

  // The store listens on the chosen interface when this host has it, on loopback for a
  // single-host job, and on every interface otherwise (each agent then finds an address that
  // reaches it).
  void startStore() {
    secret_ = auth::generateSecret();
    jobId_ = "gyre-" + auth::generateSecret().substr(0, 12);
    std::string bind = anyRemote() ? "0.0.0.0" : "127.0.0.1";
    if (!o_.networkInterface.empty()) {
      try {
        bind = net::resolveInterface(o_.networkInterface);
      } catch (const InvalidArgument&) {
        // Not an interface of this host: it names the workers' interface only.
      }
    }
    server_ = createTcpStoreServer(secret_, bind, 0);
    const std::uint16_t port = server_->port();
    if (bind != "0.0.0.0") {
      localCandidates_ = remoteCandidates_ = {net::joinHostPort(bind, port)};
      return;
    }
    localCandidates_ = {net::joinHostPort("127.0.0.1", port)};
    for (const std::string& a : net::externalAddresses())
      if (a.find(':') == std::string::npos) remoteCandidates_.push_back(net::joinHostPort(a, port));
    GYRE_USAGE_CHECK(!remoteCandidates_.empty(),
                     "this host has no non-loopback IPv4 address for remote hosts to reach the job's store");
  }

  void startAgent(const HostPlacement& p) {
    auto a = std::make_unique<AgentHandle>();
    a->place = p;
    ChildSpec spec;
    spec.name = "agent on " + p.host;
    spec.ownProcessGroup = true;  // the terminal's Ctrl-C reaches the launcher only; it stops them
    if (p.local) {
      spec.path = selfExecutable();
      spec.argv = {"gyre", "agent"};
      a->command = spec.path + " agent";
    } else {
      GYRE_USAGE_CHECK(!o_.rshAgent.empty(), "--rsh-agent is empty");
      spec.path = findExecutable(o_.rshAgent[0]);
      GYRE_USAGE_CHECK(!spec.path.empty(), "--rsh-agent: cannot find '", o_.rshAgent[0], "' in PATH");
      const std::string gyre = o_.remoteGyre.empty() ? selfExecutable() : o_.remoteGyre;
      spec.argv = o_.rshAgent;
      spec.argv.push_back(p.host);
      spec.argv.push_back("exec " + shellQuote(gyre) + " agent");
      for (const auto& w : spec.argv) {
        if (!a->command.empty()) a->command += ' ';
        a->command += shellQuote(w);
      }
    }
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
      GYRE_THROW(SystemError, "pipe2: ", std::strerror(errno));
    net::Fd agentIn(in[0]), agentOut(out[1]);
    a->toAgent = net::Fd(in[1]);
    a->fromAgent = net::Fd(out[0]);
    spec.stdinFd = agentIn.get();
    spec.stdoutFd = agentOut.get();
    a->pid = agents_.spawn(spec);

    AgentSpec job;
    job.host = p.host;
    job.jobId = jobId_;
    job.secret = secret_;
    job.storeCandidates = p.local ? localCandidates_ : remoteCandidates_;
    job.worldSize = worldSize_;
    job.firstRank = p.firstRank;
    job.count = p.count;
    job.program = o_.program;
    job.env = forwardedEnvironment();
    job.env.insert(job.env.end(), o_.exports.begin(), o_.exports.end());
    job.threads = o_.threads;
    job.startTimeoutMs = static_cast<int>(o_.startTimeoutS * 1000);
    job.interface = o_.networkInterface;
    job.stopGraceMs = o_.stopGraceMs;
    const std::string line = encodeSpec(job) + "\n";
    try {
      writeFully(a->toAgent.get(), line, Deadline::after(std::chrono::seconds(10)));
    } catch (const std::exception& e) {
      fail(
          {-1, "host " + p.host + ": cannot hand the job to its agent (" + a->command + "): " + e.what(), 1});
    }
    net::setNonBlocking(a->fromAgent.get(), true);
    agentList_.push_back(std::move(a));
  }

  AgentHandle* agentOf(pid_t pid) {
    for (auto& a : agentList_)
      if (a->pid == pid) return a.get();
    return nullptr;
  }

  void fail(Failure f) {
    if (stopping_) return;
    if (failures_.empty()) decideAt_ = Clock::now() + kFailureWindow;
    failures_.push_back(std::move(f));
  }

  void stop() {
    if (stopping_) return;
    stopping_ = true;
    killAt_ = Clock::now() + Ms(o_.stopGraceMs + 500);
    for (auto& a : agentList_) {
      if (!a->toAgent.valid()) continue;
      const char stopLine[] = "stop\n";
      [[maybe_unused]] auto n = ::write(a->toAgent.get(), stopLine, sizeof stopLine - 1);
      a->toAgent = net::Fd();  // and its end of file, for an agent that cannot read the line
    }
  }

  void onEvent(AgentHandle& a, const Event& e) {
    const auto inRange = [&](int rank) {
      return rank >= a.place.firstRank && rank < a.place.firstRank + a.place.count;
    };
    if (e.rank != -1 && !inRange(e.rank))
      GYRE_THROW(ProtocolError, "the agent on ", a.place.host, " reported rank ", e.rank,
                 ", which is not its own");
    switch (e.kind) {
      case Event::Kind::kStore:
      case Event::Kind::kDone:
        a.done |= e.kind == Event::Kind::kDone;
        break;
      case Event::Kind::kStarted:
        ranks_[e.rank].started = true;
        break;
      case Event::Kind::kOutput:
        output_->line(e.rank, e.fromStderr, e.text, e.terminator);
        break;
      case Event::Kind::kFailed:
        fail({-1, e.text, 1});
        break;
      case Event::Kind::kExit: {
        RankState& r = ranks_[e.rank];
        r.exited = true, r.code = e.code, r.signal = e.signal, r.elapsedMs = e.elapsedMs;
        if (e.code == 0 && e.signal == 0) break;
        const std::string how = e.signal != 0   ? "was killed by " + signalName(e.signal)
                                : e.code == 127 ? "exited with code 127 (the program could not be started)"
                                                : "exited with code " + std::to_string(e.code);
        fail({e.rank,
              "rank " + std::to_string(e.rank) + " on host " + a.place.host + " " + how + " after " +
                  seconds(e.elapsedMs / 1000.0) + " s",
              e.signal != 0 ? 128 + e.signal : e.code, e.signal != 0});
        break;
      }
    }
  }

  void readAgents(int waitMs) {
    std::vector<pollfd> fds;
    std::vector<AgentHandle*> owners;
    for (auto& a : agentList_) {
      if (!a->fromAgent.valid()) continue;
      fds.push_back({a->fromAgent.get(), POLLIN, 0});
      owners.push_back(a.get());
    }
    if (poll(fds.data(), fds.size(), waitMs) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      AgentHandle& a = *owners[i];
      const bool open = a.lines.readFrom(a.fromAgent.get(), [&](const std::string& line, char) {
        try {
          onEvent(a, decodeEvent(line));
        } catch (const Error& e) {
          fail({-1, "host " + a.place.host + ": " + e.what(), 1});
        }
      });
      if (!open) a.fromAgent = net::Fd();
    }
  }

  void reapAgents() {
    for (const ChildExit& e : agents_.reap()) {
      AgentHandle* a = agentOf(e.pid);
      if (a == nullptr) continue;
      a->exited = true;
      a->exit = e;
      // Its last words are in the pipe (bounded: a process the rsh agent left may hold it open).
      const Deadline drain = Deadline::after(Ms(500));
      while (a->fromAgent.valid() && !drain.expired()) readAgents(10);
      if (stopping_ || a->done) continue;
      std::vector<int> missing;
      for (int r = a->place.firstRank; r < a->place.firstRank + a->place.count; ++r)
        if (!ranks_[r].exited) missing.push_back(r);
      if (missing.empty()) continue;
      const std::string how = e.signal != 0 ? "was killed by " + signalName(e.signal)
                                            : "exited with code " + std::to_string(e.code);
      fail({-1,
            "host " + a->place.host + ": its agent (" + a->command + ") " + how + " while rank(s) " +
                rankList(missing) + " had not finished; see its messages above",
            1});
    }
  }

  void checkStartTimeout() {
    if (stopping_ || startChecked_ || Clock::now() < startDeadline_) return;
    startChecked_ = true;
    for (const auto& a : agentList_) {
      std::vector<int> missing;
      for (int r = a->place.firstRank; r < a->place.firstRank + a->place.count; ++r)
        if (!ranks_[r].started) missing.push_back(r);
      if (!missing.empty())
        fail({-1,
              "host " + a->place.host + ": rank(s) " + rankList(missing) + " did not start within " +
                  seconds(o_.startTimeoutS) +
                  " s (--start-timeout); the agent was started with: " + a->command,
              1});
    }
  }

  void supervise() {
    startDeadline_ = Clock::now() + Ms(static_cast<std::int64_t>(o_.startTimeoutS * 1000) + 5000);
    const Deadline jobDeadline = o_.timeoutS > 0
                                     ? Deadline::after(Ms(static_cast<std::int64_t>(o_.timeoutS * 1000)))
                                     : Deadline::never();
    while (true) {
      readAgents(kPollMs);
      reapAgents();
      if (!stopping_) {
        if (const int sig = interruptSignal()) {
          interrupt_ = sig;
          stop();
        } else if (jobDeadline.expired()) {
          timedOut_ = true;
          stop();
        } else if (!failures_.empty() && Clock::now() >= decideAt_) {
          stop();
        }
        checkStartTimeout();
      }
      if (stopping_ && Clock::now() >= killAt_) agents_.stopAll(Ms(0));
      const bool allGone = std::all_of(agentList_.begin(), agentList_.end(),
                                       [](const auto& a) { return a->exited && !a->fromAgent.valid(); });
      if (allGone || agents_.empty()) break;
    }
    for (auto& a : agentList_) a->toAgent = net::Fd();
  }

  int report() {
    if (!failures_.empty()) {
      // A worker killed by a signal usually caused the rest; then a worker; then the others.
      auto it = std::find_if(failures_.begin(), failures_.end(), [](const Failure& f) { return f.bySignal; });
      if (it == failures_.end())
        it = std::find_if(failures_.begin(), failures_.end(), [](const Failure& f) { return f.rank >= 0; });
      if (it == failures_.end()) it = failures_.begin();
      const Failure& cause = *it;
      std::string line = "gyre run: " + cause.message;
      if (cause.rank >= 0) {
        const std::string log = output_->logPath(cause.rank);
        line += log.empty() ? "; its last output lines follow" : "; its output is in " + log;
      }
      std::vector<std::string> others;
      for (const Failure& f : failures_)
        if (&f != &cause) others.push_back(f.message);
      if (!others.empty()) line += " (" + std::to_string(others.size()) + " other failure(s) after it)";
      std::fprintf(stderr, "%s\n", line.c_str());
      if (cause.rank >= 0 && output_->logPath(cause.rank).empty())
        for (const std::string& l : output_->tail(cause.rank))
          std::fprintf(stderr, "  [%d] %s\n", cause.rank, l.c_str());
      for (const std::string& m : others) std::fprintf(stderr, "gyre run:   also: %s\n", m.c_str());
      return cause.exitCode == 0 ? 1 : cause.exitCode;
    }
    if (interrupt_ != 0) {
      std::fprintf(stderr, "gyre run: interrupted by %s; stopped every worker\n",
                   signalName(interrupt_).c_str());
      return 128 + interrupt_;
    }
    if (timedOut_) {
      std::fprintf(stderr, "gyre run: the job ran past --timeout %s s; stopped it\n",
                   seconds(o_.timeoutS).c_str());
      return 124;
    }
    std::vector<int> unreported;
    for (int i = 0; i < worldSize_; ++i)
      if (!ranks_[i].exited) unreported.push_back(i);
    if (!unreported.empty()) {
      std::fprintf(stderr, "gyre run: the agents ended without reporting rank(s) %s\n",
                   rankList(unreported).c_str());
      return 1;
    }
    return 0;
  }

  const RunOptions& o_;
  std::vector<HostPlacement> placement_;
  int worldSize_ = 0;
  std::string secret_;
  std::string jobId_;
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<std::string> localCandidates_;
  std::vector<std::string> remoteCandidates_;
  std::unique_ptr<OutputSink> output_;
  ProcessGroup agents_;
  std::vector<std::unique_ptr<AgentHandle>> agentList_;
  std::vector<RankState> ranks_;
  std::vector<Failure> failures_;
  Clock::time_point decideAt_{};
  Clock::time_point killAt_{};
  Clock::time_point startDeadline_{};
  bool startChecked_ = false;
  bool stopping_ = false;
  bool timedOut_ = false;
  int interrupt_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> forwardedEnvironment() {
  static const char* const kSetByLauncher[] = {"GYRE_RANK",        "GYRE_WORLD_SIZE", "GYRE_LOCAL_RANK",
                                               "GYRE_LOCAL_SIZE",  "GYRE_STORE_ADDR", "GYRE_SECRET",
                                               "GYRE_JOB_ID",      "GYRE_HOST_STORE", "GYRE_START_TIMEOUT_MS",
                                               "GYRE_NUM_THREADS", "GYRE_IFACE"};
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : processEnvironment()) {
    if (!name.starts_with("GYRE_")) continue;
    if (std::find_if(std::begin(kSetByLauncher), std::end(kSetByLauncher),
                     [&](const char* n) { return name == n; }) != std::end(kSetByLauncher))
      continue;
    out.emplace_back(name, value);
  }
  return out;
}

int runJob(const RunOptions& options) {
  GYRE_USAGE_CHECK(!options.program.empty(), "no program given: gyre run [options] -- PROGRAM [ARGS...]");
  GYRE_USAGE_CHECK(options.np >= 0, "-np must be positive");
  GYRE_USAGE_CHECK(options.startTimeoutS > 0, "--start-timeout must be positive");
  GYRE_USAGE_CHECK(options.timeoutS >= 0, "--timeout must not be negative");
  GYRE_USAGE_CHECK(options.threads >= 0, "--threads must not be negative");
  return Job(options).run();
}

}  // namespace gyre::launcher
