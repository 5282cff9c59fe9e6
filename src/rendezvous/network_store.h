// Implemented by stores reached over the network, so a communicator can listen on the same
// interface the store connection uses (the interface that reaches the other hosts).
#pragma once

#include <string>

namespace gyre::rendezvous {

class NetworkStore {
 public:
  virtual ~NetworkStore() = default;
  // The local IP address of the connection to the store server.
  virtual std::string localAddress() const = 0;
};

}  // namespace gyre::rendezvous
