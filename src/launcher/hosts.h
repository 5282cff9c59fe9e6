// Where a job's workers run: the host list of `gyre run -H` / `--hostfile`, and the placement of
// ranks on it (hosts in order, each filled to its slots, as `mpirun --map-by slot` does).
#pragma once

#include <string>
#include <vector>

namespace gyre::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
  bool operator==(const HostSlots&) const = default;
};

// "host1:2,host2,host3:4" (slots default to 1). Throws InvalidArgument on a malformed entry.
std::vector<HostSlots> parseHostList(const std::string& list);

// A hostfile's text: one host per line as "host", "host:N", "host slots=N" (OpenMPI) or
// "host N"; `#` starts a comment; blank lines are skipped. `source` names the file in errors.
std::vector<HostSlots> parseHostfile(const std::string& text, const std::string& source);

// The slots of every host together.
int totalSlots(const std::vector<HostSlots>& hosts);

// True for names that mean this host: localhost, loopback addresses, and this host's name.
bool isLocalHost(const std::string& name);

struct HostPlacement {
  std::string host;
  bool local = false;
  int firstRank = 0;  // ranks firstRank .. firstRank + count - 1 run on this host
  int count = 0;
};

// Places `np` ranks on `hosts` in order, filling each host's slots. np <= 0 means every slot.
// Hosts that get no rank are left out. Throws InvalidArgument when np exceeds the slots or a
// host is listed twice.
std::vector<HostPlacement> placeRanks(const std::vector<HostSlots>& hosts, int np);

}  // namespace gyre::launcher
