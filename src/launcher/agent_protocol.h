// What `gyre run` and its per-host agents say to each other.
//
// The launcher starts one agent per host (`gyre agent`, directly for this host, through the rsh
// agent for others), writes one JSON line with the AgentSpec to the agent's stdin, and keeps
// stdin open: a "stop" line, or stdin's end, tells the agent to stop its workers. An agent serves
// one generation of the job: after a restart (--max-restarts) the launcher starts new agents. With
// --servers, a host's parameter servers get an agent of their own (AgentSpec::serverIndices). The agent
// answers on stdout with one Event per line. The secret travels on stdin, never on a command
// line, so `ps` does not show it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gyre::launcher {

struct AgentSpec {
  std::string host;  // the host's name as the launcher knows it, for messages
  std::string jobId;
  std::string secret;
  // "host:port" addresses of the job's store, tried in order until one answers.
  std::vector<std::string> storeCandidates;
  int worldSize = 1;
  int firstRank = 0;  // this host runs ranks firstRank .. firstRank + count - 1
  int count = 1;
  std::vector<std::string> program;                      // the worker's argv; argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;  // set in every worker
  int threads = 0;  // compute threads per worker; 0: this host's cores / (coreShare or count)
  // How many workers share this host's cores when threads is 0; 0: count. An elastic job runs
  // one agent per worker, so it passes the host's slots here.
  int coreShare = 0;
  int startTimeoutMs = 30000;
  std::string interface;   // GYRE_IFACE for the workers; empty: none
  int stopGraceMs = 1000;  // SIGTERM, then SIGKILL after this long
  int restartCount = 0;    // GYRE_RESTART_COUNT: the job's generation, 0 first (--max-restarts)
  int maxRestarts = 0;     // GYRE_MAX_RESTARTS
  // `gyre run --servers S`: S, given to every process as GYRE_PS_SERVERS; 0: no parameter servers.
  int psServers = 0;
  // Not empty: this agent runs these parameter servers (`gyre ps-server`, its own executable, each
  // with GYRE_PS_SERVER_INDEX) instead of workers. Then worldSize is psServers, count is their
  // number, events name a server by its index in `rank`, and program is not used.
  std::vector<int> serverIndices;
};

std::string encodeSpec(const AgentSpec& spec);
// Throws ProtocolError on anything malformed.
AgentSpec decodeSpec(const std::string& line);

struct Event {
  enum class Kind : char {
    kStore = 'A',    // text: the store address the agent reached
    kStarted = 'S',  // rank, pid
    kOutput = 'O',   // rank, fromStderr, terminator, text
    kExit = 'X',     // rank, code (-1 when killed), signal, elapsedMs
    kFailed = 'F',   // text: why the agent cannot go on (before any worker started)
    kDone = 'D',     // every worker has exited and been reported
  };
  Kind kind = Kind::kDone;
  int rank = -1;
  pid_t pid = 0;
  bool fromStderr = false;
  // How the output line ended: '\n', '\r', or 0 when it was cut because it was too long.
  char terminator = '\n';
  std::string text;
  int code = 0;
  int signal = 0;
  std::int64_t elapsedMs = 0;
};

// One line without its newline. `text` must not contain '\n' or '\r' (output is split on them).
std::string encodeEvent(const Event& event);
// Throws ProtocolError on a malformed line.
Event decodeEvent(const std::string& line);

// Quotes a word for a POSIX shell: 'it'\''s'.
std::string shellQuote(const std::string& word);
// Splits a command line such as `ssh -p 2222 -o "BatchMode yes"` into words (single and double
// quotes, backslash escapes; no expansions). Throws InvalidArgument on an unterminated quote.
std::vector<std::string> splitCommandLine(const std::string& line);

}  // namespace gyre::launcher
