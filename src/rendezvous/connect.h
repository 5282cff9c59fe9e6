// One way to open the store a job's address names (GYRE_STORE_ADDR), for every process that
// joins a job: workers (init, the elastic rendezvous) and parameter servers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "gyre/store.h"

namespace gyre::rendezvous {

// "file:PATH" (a file store), "etcd://host:port[,host:port...][/path]" (an etcd cluster), or
// "host:port" (a TCP store, authenticated with `secret`).
std::shared_ptr<Store> connectStore(const std::string& address, const std::string& secret,
                                    std::chrono::milliseconds timeout);

}  // namespace gyre::rendezvous
