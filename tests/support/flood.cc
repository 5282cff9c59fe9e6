#include "support/flood.h"

#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "common/clock.h"

namespace gyre::test {

Flood::Flood(const std::string& address, Counts counts) {
  const auto [host, port] = net::splitHostPort(address);
  const Deadline deadline = Deadline::after(std::chrono::seconds(30));
  for (int i = 0; i < counts.idle + counts.slow + counts.garbage; ++i) {
    fds_.push_back(net::connectTo(host, port, deadline));
    if (i >= counts.idle && i < counts.idle + counts.slow) {
      slow_.push_back(fds_.back().get());
    } else if (i >= counts.idle + counts.slow) {
      const std::string junk = "GET / HTTP/1.1\r\n\r\n" + std::string(64, static_cast<char>(i));
      ::send(fds_.back().get(), junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
  trickle_ = std::thread([this] {
    const char hello[] = "GYR1C0123456789abcdef";  // a client hello, one byte every 100 ms
    for (std::size_t at = 0; !stop_.load(); at = (at + 1) % (sizeof(hello) - 1)) {
      for (int fd : slow_) ::send(fd, hello + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

Flood::~Flood() {
  stop_ = true;
  trickle_.join();
}

int threadCount() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

}  // namespace gyre::test
