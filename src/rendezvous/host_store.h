// The store of a job whose rank hosts it (rank 0 under torchrun, Slurm and mpirun): a TCP store
// server and this process's client of it in one object.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gyre/store.h"

namespace gyre::rendezvous {

// Starts a TcpStoreServer on bindAddress:port (port 0: any free port) and returns a client
// Store connected to it that owns the server: the server serves the other ranks for as long
// as the returned Store lives (keep it alive until every rank is done with the store).
// `timeout` becomes the store's default time-out. Throws SystemError when the port is taken.
// Thread-safety: as any Store.
std::shared_ptr<Store> hostTcpStore(const std::string& secret, const std::string& bindAddress,
                                    std::uint16_t port,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The address ("host:port") that the server of a store returned by hostTcpStore serves on, for
// the other ranks. Throws InvalidArgument for any other store.
std::string hostedStoreAddress(const Store& store);

}  // namespace gyre::rendezvous
