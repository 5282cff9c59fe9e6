// --host-discovery-script of `gyre run --elastic`: runs the script (through /bin/sh, so it may
// carry arguments) every interval, never for longer than a time limit, and reads the hosts it
// prints, one a line: `host` or `host:slots` (every hostfile form works: `host slots=N`,
// `host N`; `#` comments). No lines at all means no hosts. Horovod's --host-discovery-script.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/socket.h"
#include "launcher/hosts.h"
#include "launcher/process.h"

namespace gyre::launcher {

// The hosts in a discovery script's output; throws InvalidArgument on a malformed line or a host
// listed twice.
std::vector<HostSlots> parseDiscoveredHosts(const std::string& text);

// Not thread-safe. The destructor kills a run still going, with anything it started.
class HostDiscovery {
 public:
  struct Result {
    bool ok = false;
    std::vector<HostSlots> hosts;  // when ok
    std::string error;             // otherwise: "exited with code 2: <its first stderr line>"
  };

  HostDiscovery(std::string script, std::chrono::milliseconds interval,
                std::chrono::milliseconds limit = std::chrono::seconds(10));

  // Runs the script now and waits for it (at most the limit).
  Result runNow();
  // Starts a run when one is due (an interval after the last ended), reads a run in progress,
  // and returns its result once it ended; never blocks.
  std::optional<Result> poll();

 private:
  void start();
  void drain();
  Result finish(const ChildExit* exit);

  std::string script_;
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds limit_;
  ProcessGroup group_;
  pid_t pid_ = 0;  // the run in progress, 0 when none
  net::Fd out_, err_;
  std::string outText_, errText_;
  Clock::time_point killAt_{};
  Clock::time_point nextRun_{};
};

}  // namespace gyre::launcher
