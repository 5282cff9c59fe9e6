#include "launcher/generation.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/auth.h"
#include "common/check.h"
#include "common/socket.h"
#include "gyre/store.h"
#include "launcher/agent_protocol.h"
#include "launcher/line_reader.h"
#include "launcher/process.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;

// Failures that arrive this soon after the first are weighed together: a worker killed by a
// signal is reported before the peers that failed because they lost it.
constexpr Ms kFailureWindow{200};
constexpr int kPollMs = 50;

struct RankState {
  bool started = false;
  bool exited = false;
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
};

class Generation {
 public:
  Generation(const GenerationSpec& spec, OutputSink& output)
      : s_(spec), o_(*spec.options), output_(output), ranks_(spec.worldSize) {}

  GenerationOutcome run() {
    startStore();
    for (const HostPlacement& p : s_.placement) startAgent(p);
    supervise();
    output_.flush();
    std::vector<int> unreported;
    for (int i = 0; i < s_.worldSize; ++i)
      if (!ranks_[i].exited) unreported.push_back(i);
    if (outcome_.failures.empty() && outcome_.interrupt == 0 && !outcome_.timedOut && !unreported.empty())
      outcome_.failures.push_back({-1, "the agents ended without reporting rank(s) " + rankList(unreported)});
    return std::move(outcome_);
  }

 private:
  bool anyRemote() const {
    return std::any_of(s_.placement.begin(), s_.placement.end(), [](const auto& p) { return !p.local; });
  }

  // The store listens on the chosen interface when this host has it, on loopback for a
  // single-host job, and on every interface otherwise (each agent then finds an address that
  // reaches it). A fresh secret and port per generation: the rendezvous starts from nothing.
  void startStore() {
    secret_ = auth::generateSecret();
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
    job.jobId = s_.jobId;
    job.secret = secret_;
    job.storeCandidates = p.local ? localCandidates_ : remoteCandidates_;
    job.worldSize = s_.worldSize;
    job.firstRank = p.firstRank;
    job.count = p.count;
    job.program = o_.program;
    job.env = forwardedEnvironment();
    job.env.insert(job.env.end(), o_.exports.begin(), o_.exports.end());
    job.threads = o_.threads;
    job.startTimeoutMs = static_cast<int>(o_.startTimeoutS * 1000);
    job.interface = o_.networkInterface;
    job.stopGraceMs = o_.stopGraceMs;
    job.restartCount = s_.generation;
    job.maxRestarts = s_.maxRestarts;
    const std::string line = encodeSpec(job) + "\n";
    try {
      writeFully(a->toAgent.get(), line, Deadline::after(std::chrono::seconds(10)));
    } catch (const std::exception& e) {
      fail({-1, "host " + p.host + ": cannot hand the job to its agent (" + a->command + "): " + e.what()});
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
    if (outcome_.failures.empty()) decideAt_ = Clock::now() + kFailureWindow;
    outcome_.failures.push_back(std::move(f));
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
        output_.line(e.rank, e.fromStderr, e.text, e.terminator);
        break;
      case Event::Kind::kFailed:
        fail({-1, e.text});
        break;
      case Event::Kind::kExit: {
        ranks_[e.rank].exited = true;
        if (e.code == 0 && e.signal == 0) break;
        const std::string how = e.signal != 0   ? "was killed by " + signalName(e.signal)
                                : e.code == 127 ? "exited with code 127 (the program could not be started)"
                                                : "exited with code " + std::to_string(e.code);
        Failure f{e.rank,
                  "rank " + std::to_string(e.rank) + " on host " + a.place.host + " " + how + " after " +
                      formatSeconds(e.elapsedMs / 1000.0) + " s",
                  e.signal != 0 ? 128 + e.signal : e.code, e.signal != 0};
        f.restartable = true;
        fail(std::move(f));
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
          fail({-1, "host " + a.place.host + ": " + e.what()});
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
      // Its last words are in the pipe (bounded: a process the rsh agent left may hold it open).
      const Deadline drain = Deadline::after(Ms(500));
      while (a->fromAgent.valid() && !drain.expired()) readAgents(10);
      if (stopping_ || a->done) continue;
      std::vector<int> missing;
      bool allStarted = true;
      for (int r = a->place.firstRank; r < a->place.firstRank + a->place.count; ++r) {
        if (!ranks_[r].exited) missing.push_back(r);
        allStarted &= ranks_[r].started;
      }
      if (missing.empty()) continue;
      const std::string how = e.signal != 0 ? "was killed by " + signalName(e.signal)
                                            : "exited with code " + std::to_string(e.code);
      Failure f{-1, "host " + a->place.host + ": its agent (" + a->command + ") " + how + " while rank(s) " +
                        rankList(missing) + " had not finished; see its messages above"};
      f.restartable = allStarted;  // a host lost mid-run, not one whose agent could not start
      fail(std::move(f));
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
        fail({-1, "host " + a->place.host + ": rank(s) " + rankList(missing) + " did not start within " +
                      formatSeconds(o_.startTimeoutS) +
                      " s (--start-timeout); the agent was started with: " + a->command});
    }
  }

  void supervise() {
    startDeadline_ = Clock::now() + Ms(static_cast<std::int64_t>(o_.startTimeoutS * 1000) + 5000);
    while (true) {
      readAgents(kPollMs);
      reapAgents();
      if (!stopping_) {
        if (const int sig = interruptSignal()) {
          outcome_.interrupt = sig;
          stop();
        } else if (s_.jobDeadline.expired()) {
          outcome_.timedOut = true;
          stop();
        } else if (!outcome_.failures.empty() && Clock::now() >= decideAt_) {
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

  const GenerationSpec& s_;
  const RunOptions& o_;
  OutputSink& output_;
  std::string secret_;
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<std::string> localCandidates_;
  std::vector<std::string> remoteCandidates_;
  ProcessGroup agents_;
  std::vector<std::unique_ptr<AgentHandle>> agentList_;
  std::vector<RankState> ranks_;
  GenerationOutcome outcome_;
  Clock::time_point decideAt_{};
  Clock::time_point killAt_{};
  Clock::time_point startDeadline_{};
  bool startChecked_ = false;
  bool stopping_ = false;
};

}  // namespace

GenerationOutcome runGeneration(const GenerationSpec& spec, OutputSink& output) {
  return Generation(spec, output).run();
}

}  // namespace gyre::launcher
