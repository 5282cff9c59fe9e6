// The TCP store a `gyre run` job's workers meet at, hosted by the launcher, and the addresses its
// agents try to reach it at. A fresh secret and port each time one is started: a rendezvous
// starts from nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gyre/store.h"

namespace gyre::launcher {

struct JobStore {
  std::string secret;
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::string> localCandidates;   // "host:port" for agents on this host
  std::vector<std::string> remoteCandidates;  // for agents on other hosts; may be empty (see below)
};

// Listens on `networkInterface` when this host has it, on loopback when no host is remote, and
// on every interface otherwise (each agent then finds an address that reaches it). With
// `requireRemote`, throws InvalidArgument when remote hosts would have no address to reach it;
// without, remoteCandidates is left empty then (hosts that may turn up later: --elastic's
// discovery). The port is none of `usedPorts` (earlier generations' stores: the kernel may hand
// a closed port out again, and a fresh rendezvous means a fresh address too).
JobStore startJobStore(const std::string& networkInterface, bool anyRemote, bool requireRemote = true,
                       const std::vector<std::uint16_t>& usedPorts = {});

// Calls `listen` until the server it returns is on none of `usedPorts`, and returns that one; the
// others stay open until then (so the kernel hands out another port each time).
std::unique_ptr<TcpStoreServer> listenAvoiding(const std::function<std::unique_ptr<TcpStoreServer>()>& listen,
                                               const std::vector<std::uint16_t>& usedPorts);

}  // namespace gyre::launcher
