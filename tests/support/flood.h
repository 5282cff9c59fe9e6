// A connection flood against one listening address, held until destroyed: idle connections that
// never send a byte, slow ones that trickle a valid-looking hello one byte at a time, and ones
// that send garbage. For the tests that real clients get in and servers keep no thread per
// pending connection (common/auth_gate.h).
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/socket.h"

namespace gyre::test {

class Flood {
 public:
  struct Counts {
    int idle = 0;
    int slow = 0;
    int garbage = 0;
  };
  // Opens every connection before returning (the slow ones then trickle on a thread of their own).
  Flood(const std::string& address, Counts counts);
  ~Flood();

  int opened() const { return static_cast<int>(fds_.size()); }

 private:
  std::vector<net::Fd> fds_;
  std::vector<int> slow_;  // of fds_
  std::atomic<bool> stop_{false};
  std::thread trickle_;
};

// Threads of this process now (/proc/self/status).
int threadCount();

}  // namespace gyre::test
