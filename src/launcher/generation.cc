#include "launcher/generation.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "common/check.h"
#include "common/numbers.h"
#include "launcher/agent_pool.h"
#include "launcher/process.h"
#include "launcher/ps_servers.h"
#include "launcher/run_metrics.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;

// Failures that arrive this soon after the first are weighed together: a worker killed by a
// signal is reported before the peers that failed because they lost it.
constexpr Ms kFailureWindow{200};

struct RankState {
  bool started = false;
  bool exited = false;
};

class Generation {
 public:
  Generation(const GenerationSpec& spec, OutputSink& output)
      : s_(spec),
        o_(*spec.options),
        output_(output),
        agents_(
            o_, [this](AgentHandle& a, const Event& e) { onEvent(a, e); },
            [this](AgentHandle& a, const std::string& why) {
              fail({-1, "host " + a.place.host + ": " + why});
            }),
        ranks_(spec.worldSize),
        servers_(o_.servers) {}

  GenerationOutcome run() {
    store_ = startJobStore(o_.networkInterface, anyRemote(), true, s_.usedStorePorts);
    outcome_.storePort = store_.server->port();
    for (const ServerPlacement& p : placeServers(s_.placement, o_.servers, o_.serverHosts)) startServers(p);
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
  // Hosts other than this one, the servers' (--server-hosts) included, need a store they can reach.
  bool anyRemote() const {
    return std::any_of(s_.placement.begin(), s_.placement.end(), [](const auto& p) { return !p.local; }) ||
           std::any_of(o_.serverHosts.begin(), o_.serverHosts.end(),
                       [&](const std::string& h) { return o_.servers > 0 && !isLocalHost(h); });
  }

  void startAgent(const HostPlacement& p) {
    AgentSpec job = baseAgentSpec(o_, store_, p, s_.jobId);
    job.worldSize = s_.worldSize;
    job.firstRank = p.firstRank;
    job.count = p.count;
    job.restartCount = s_.generation;
    job.maxRestarts = s_.maxRestarts;
    job.psServers = o_.servers;
    agents_.start(p, job);
  }

  // One agent for the parameter servers placed on a host: a second agent there, beside the
  // workers', so that each is supervised as what it is.
  void startServers(const ServerPlacement& p) {
    const HostPlacement place{p.host, p.local, 0, static_cast<int>(p.indices.size())};
    AgentSpec job = baseAgentSpec(o_, store_, place, s_.jobId);
    job.program = {"gyre", "ps-server"};
    job.worldSize = o_.servers;
    job.firstRank = 0;
    job.count = place.count;
    job.restartCount = s_.generation;
    job.maxRestarts = s_.maxRestarts;
    job.psServers = o_.servers;
    job.serverIndices = p.indices;
    for (int i : p.indices) servers_[i].host = p.host;
    agents_.start(place, job).servers = true;
  }

  bool allWorkersExited() const {
    return std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.exited; });
  }

  // Every worker has exited: the servers are no longer needed.
  void stopServers() {
    if (serversStopping_) return;
    serversStopping_ = true;
    for (const auto& a : agents_.agents())
      if (a->servers) agents_.stop(*a);
    killAt_ = Clock::now() + Ms(o_.stopGraceMs + 500);
  }

  // A server's exit: news only while the workers may still need it.
  void serverExited(int index, const Event& e) {
    ServerState& server = servers_[index];
    if (server.exited) return;
    server.exited = true;
    if (!stopping_ && !serversStopping_) {
      std::fprintf(stderr, "gyre run: %s\n",
                   serverLostLine(index, o_.servers, server, endOf(e).what).c_str());
    } else if ((e.code != 0 && e.signal == 0) ||
               (e.signal != 0 && e.signal != SIGTERM && e.signal != SIGKILL)) {
      std::fprintf(stderr, "gyre run: ps server %d on host %s %s while being stopped\n", index,
                   server.host.c_str(), exitDescription(e).c_str());
    }
  }

  void onServerEvent(AgentHandle& a, const Event& e) {
    const bool aboutOne =
        e.kind == Event::Kind::kStarted || e.kind == Event::Kind::kOutput || e.kind == Event::Kind::kExit;
    if (aboutOne && (e.rank < 0 || e.rank >= o_.servers || servers_[e.rank].host != a.place.host))
      GYRE_THROW(ProtocolError, "the agent on ", a.place.host, " reported ps server ", e.rank,
                 ", which is not its own");
    switch (e.kind) {
      case Event::Kind::kStore:
      case Event::Kind::kDone:
        a.done |= e.kind == Event::Kind::kDone;
        break;
      case Event::Kind::kStarted:
        servers_[e.rank].started = true;
        servers_[e.rank].pid = e.pid;
        break;
      case Event::Kind::kOutput:
        output_.serverLine(e.rank, e.fromStderr, e.text, e.terminator);
        break;
      case Event::Kind::kFailed:  // before its servers started: the workers would wait for them
        if (!serversStopping_) fail({-1, "ps servers on host " + a.place.host + ": " + e.text});
        break;
      case Event::Kind::kExit:
        serverExited(e.rank, e);
        break;
    }
  }

  void fail(Failure f) {
    if (stopping_) return;
    if (outcome_.failures.empty()) decideAt_ = Clock::now() + kFailureWindow;
    outcome_.failures.push_back(std::move(f));
  }

  // Stops the workers; the servers follow once the workers have exited (stopServers), so that no
  // worker sees its servers go first.
  void stop() {
    if (stopping_) return;
    stopping_ = true;
    killAt_ = Clock::now() + Ms(o_.stopGraceMs + 500);
    for (const auto& a : agents_.agents())
      if (!a->servers) agents_.stop(*a);
  }

  void onEvent(AgentHandle& a, const Event& e) {
    if (a.servers) {
      onServerEvent(a, e);
      return;
    }
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
        RunMetrics::get().workerStarted();
        break;
      case Event::Kind::kOutput:
        output_.line(e.rank, e.fromStderr, e.text, e.terminator);
        break;
      case Event::Kind::kFailed:
        fail({-1, e.text});
        break;
      case Event::Kind::kExit: {
        ranks_[e.rank].exited = true;
        // A worker that ended by itself, or on the launcher's stop, was answering; only SIGKILL ends
        // a stopped (SIGSTOP) or hung one.
        if (e.signal != SIGKILL) outcome_.answered.push_back(e.rank);
        const WorkerEnd end = endOf(e);
        RunMetrics::get().workerExited(!end.ok);
        const std::string what = "rank " + std::to_string(e.rank) + " on host " + a.place.host + " " + end.what;
        if (o_.keepGoing && e.rank == 0 && end.ok) {
          stop();  // rank 0 drove the job; the others were serving it
          break;
        }
        if (end.ok) break;
        if (o_.keepGoing && e.rank != 0 && !stopping_) {
          std::fprintf(stderr, "gyre run: %s; the job goes on without it (--keep-going)\n", what.c_str());
          break;
        }
        Failure f{e.rank, what, end.exitCode, end.bySignal};
        f.restartable = true;
        fail(std::move(f));
        break;
      }
    }
  }

  void reapAgents() {
    for (const auto& [a, e] : agents_.reap()) {
      if (stopping_ || a->done) continue;
      if (a->servers) {
        if (serversStopping_) continue;  // told to stop (before it started them, maybe)
        Event lost;
        lost.kind = Event::Kind::kExit, lost.code = e.code, lost.signal = e.signal;
        for (std::size_t i = 0; i < servers_.size(); ++i)
          if (servers_[i].host == a->place.host && !servers_[i].exited)
            serverExited(static_cast<int>(i), lost);
        continue;
      }
      std::vector<int> missing;
      bool allStarted = true;
      for (int r = a->place.firstRank; r < a->place.firstRank + a->place.count; ++r) {
        if (!ranks_[r].exited) missing.push_back(r);
        allStarted &= ranks_[r].started;
      }
      if (missing.empty()) continue;
      for (int r : missing)
        if (ranks_[r].started) RunMetrics::get().workerExited(true);
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
    for (const auto& a : agents_.agents()) {
      std::vector<int> missing;
      if (a->servers) {
        if (serversStopping_) continue;
        for (std::size_t i = 0; i < servers_.size(); ++i)
          if (servers_[i].host == a->place.host && !servers_[i].started)
            missing.push_back(static_cast<int>(i));
        if (!missing.empty())
          fail({-1, "host " + a->place.host + ": ps server(s) " + rankList(missing) +
                        " did not start within " + formatSeconds(o_.startTimeoutS) +
                        " s (--start-timeout); the agent was started with: " + a->command});
        continue;
      }
      for (int r = a->place.firstRank; r < a->place.firstRank + a->place.count; ++r)
        if (!ranks_[r].started) missing.push_back(r);
      if (!missing.empty())
        fail({-1, "host " + a->place.host + ": rank(s) " + rankList(missing) + " did not start within " +
                      formatSeconds(o_.startTimeoutS) +
                      " s (--start-timeout); the agent was started with: " + a->command});
    }
  }

  void supervise() {
    startDeadline_ = Clock::now() + numbers::millis(o_.startTimeoutS) + Ms(5000);
    while (true) {
      agents_.read(AgentPool::kPollMs);
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
      if (!servers_.empty() && allWorkersExited()) stopServers();
      if ((stopping_ || serversStopping_) && Clock::now() >= killAt_) {
        if (!servers_.empty() && !serversStopping_) {
          stopServers();  // workers past their grace period: now the servers, with theirs
        } else {
          agents_.killAll();
        }
      }
      if (agents_.allGone() || agents_.empty()) break;
    }
    agents_.stopAll();
  }

  const GenerationSpec& s_;
  const RunOptions& o_;
  OutputSink& output_;
  JobStore store_;
  AgentPool agents_;
  std::vector<RankState> ranks_;
  std::vector<ServerState> servers_;  // by index; empty without --servers
  GenerationOutcome outcome_;
  Clock::time_point decideAt_{};
  Clock::time_point killAt_{};
  Clock::time_point startDeadline_{};
  bool startChecked_ = false;
  bool stopping_ = false;
  bool serversStopping_ = false;  // every worker has exited; the servers were told to stop
};

}  // namespace

GenerationOutcome runGeneration(const GenerationSpec& spec, OutputSink& output) {
  return Generation(spec, output).run();
}

}  // namespace gyre::launcher
