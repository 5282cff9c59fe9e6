#include "launcher/agent_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/check.h"
#include "common/numbers.h"
#include "launcher/failures.h"

namespace gyre::launcher {

AgentSpec baseAgentSpec(const RunOptions& o, const JobStore& store, const HostPlacement& place,
                        const std::string& jobId) {
  AgentSpec spec;
  spec.host = place.host;
  spec.jobId = jobId;
  spec.secret = store.secret;
  spec.storeCandidates = place.local ? store.localCandidates : store.remoteCandidates;
  spec.program = o.program;
  spec.env = forwardedEnvironment();
  spec.env.insert(spec.env.end(), o.exports.begin(), o.exports.end());
  spec.threads = o.threads;
  spec.startTimeoutMs = static_cast<int>(numbers::millis(o.startTimeoutS).count());
  spec.interface = o.networkInterface;
  spec.stopGraceMs = o.stopGraceMs;
  return spec;
}

std::string exitDescription(const Event& e) {
  if (e.signal != 0) return "was killed by " + signalName(e.signal);
  if (e.code == 127) return "exited with code 127 (the program could not be started)";
  return "exited with code " + std::to_string(e.code);
}

WorkerEnd endOf(const Event& e) {
  const bool ok = e.code == 0 && e.signal == 0;
  return {ok, exitDescription(e) + " after " + formatSeconds(e.elapsedMs / 1000.0) + " s",
          e.signal != 0 ? 128 + e.signal : e.code, e.signal != 0};
}

AgentHandle& AgentPool::start(const HostPlacement& place, const AgentSpec& job) {
  auto a = std::make_unique<AgentHandle>();
  a->place = place;
  ChildSpec spec;
  spec.name = "agent on " + place.host;
  spec.ownProcessGroup = true;  // the terminal's Ctrl-C reaches the launcher only; it stops them
  if (place.local && !o_.srunAgents) {
    spec.path = selfExecutable();
    spec.argv = {"gyre", "agent"};
    a->command = spec.path + " agent";
  } else {
    GYRE_USAGE_CHECK(!o_.rshAgent.empty(), "--rsh-agent is empty");
    spec.path = findExecutable(o_.rshAgent[0]);
    GYRE_USAGE_CHECK(!spec.path.empty(), "--rsh-agent: cannot find '", o_.rshAgent[0], "' in PATH");
    const std::string gyre = o_.remoteGyre.empty() || place.local ? selfExecutable() : o_.remoteGyre;
    spec.argv = o_.rshAgent;
    if (o_.srunAgents) {
      spec.argv.insert(spec.argv.end(), {"--nodelist=" + place.host, gyre, "agent"});
    } else {
      spec.argv.push_back(place.host);
      spec.argv.push_back("exec " + shellQuote(gyre) + " agent");
    }
    for (const auto& w : spec.argv) {
      if (!a->command.empty()) a->command += ' ';
      a->command += shellQuote(w);
    }
  }
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2: ", std::strerror(errno));
  net::Fd agentIn(in[0]);
  a->toAgent = net::Fd(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2: ", std::strerror(errno));
  net::Fd agentOut(out[1]);
  a->fromAgent = net::Fd(out[0]);
  spec.stdinFd = agentIn.get();
  spec.stdoutFd = agentOut.get();
  a->pid = group_.spawn(spec);
  net::setNonBlocking(a->fromAgent.get(), true);
  AgentHandle& handle = *a;
  agents_.push_back(std::move(a));
  try {
    writeFully(handle.toAgent.get(), encodeSpec(job) + "\n", Deadline::after(std::chrono::seconds(10)));
  } catch (const std::exception& e) {
    onError_(handle, "cannot hand the job to its agent (" + handle.command + "): " + e.what());
  }
  return handle;
}

void AgentPool::read(int waitMs) {
  std::vector<pollfd> fds;
  std::vector<AgentHandle*> owners;
  for (auto& a : agents_) {
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
        onEvent_(a, decodeEvent(line));
      } catch (const Error& e) {
        onError_(a, e.what());
      }
    });
    if (!open) a.fromAgent = net::Fd();
  }
}

AgentHandle* AgentPool::byPid(pid_t pid) {
  for (auto& a : agents_)
    if (a->pid == pid) return a.get();
  return nullptr;
}

std::vector<std::pair<AgentHandle*, ChildExit>> AgentPool::reap() {
  std::vector<std::pair<AgentHandle*, ChildExit>> out;
  for (const ChildExit& e : group_.reap()) {
    AgentHandle* a = byPid(e.pid);
    if (a == nullptr) continue;
    a->exited = true;
    const Deadline drain = Deadline::after(std::chrono::milliseconds(500));
    while (a->fromAgent.valid() && !drain.expired()) read(10);
    out.emplace_back(a, e);
  }
  return out;
}

void AgentPool::stop(AgentHandle& a) {
  if (!a.toAgent.valid()) return;
  const char stopLine[] = "stop\n";
  [[maybe_unused]] auto n = ::write(a.toAgent.get(), stopLine, sizeof stopLine - 1);
  a.toAgent = net::Fd();  // and its end of file, for an agent that cannot read the line
}

void AgentPool::stopAll() {
  for (auto& a : agents_) stop(*a);
}

bool AgentPool::allGone() const {
  return std::all_of(agents_.begin(), agents_.end(), [](const auto& a) { return a->gone(); });
}

}  // namespace gyre::launcher
