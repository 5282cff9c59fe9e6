// Thin RAII wrappers over BSD sockets: addresses (IPv4 and IPv6), listening, connecting and
// reading/writing whole buffers under a deadline. Everything here throws gyre errors.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>
#include <utility>

#include "common/clock.h"
#include "gyre/errors.h"

namespace gyre::net {

// Raised when the other end closed the connection (EOF or reset) during readAll/writeAll.
class ConnectionClosed : public Error {
 public:
  using Error::Error;
};

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "host:port" or "[v6]:port" -> {host, port}. Throws InvalidArgument.
std::pair<std::string, std::uint16_t> splitHostPort(const std::string& address);
// {host, port} -> "host:port", bracketing IPv6 literals.
std::string joinHostPort(const std::string& host, std::uint16_t port);

// Resolves an interface name ("lo", "eth0") to its first IPv4 address (IPv6 if it has no IPv4);
// an address literal or host name is returned unchanged. Throws InvalidArgument if the name is
// neither an interface nor resolvable.
std::string resolveInterface(const std::string& nameOrAddress);

// This host's addresses on interfaces that are up, loopback and link-local ones left out; IPv4
// first.
std::vector<std::string> externalAddresses();

// This host's name (gethostname), for messages.
std::string hostName();

// Listens on host:port (port 0: any free port). SO_REUSEADDR, close-on-exec.
Fd listenOn(const std::string& host, std::uint16_t port, int backlog = 1024);
// Local address and port of a bound or connected socket.
std::string localHost(int fd);
std::uint16_t localPort(int fd);
// The peer's address of a connected socket, as "host:port".
std::string peerAddress(int fd);

// Connects to host:port, retrying refused connections until the deadline. Throws TimeoutError
// naming the address when it passes. The socket is blocking, with TCP_NODELAY.
Fd connectTo(const std::string& host, std::uint16_t port, Deadline deadline);
// Accepts one connection; throws TimeoutError when the deadline passes.
Fd acceptOne(int listenFd, Deadline deadline);

// Whole-buffer I/O under a deadline; works on blocking and non-blocking sockets.
// Throw ConnectionClosed on EOF/reset, TimeoutError past the deadline.
void writeAll(int fd, const void* data, std::size_t n, Deadline deadline);
void readAll(int fd, void* data, std::size_t n, Deadline deadline);
// Waits until fd is ready for `events` (POLLIN, POLLOUT) or the deadline passes; false on time-out.
bool waitFor(int fd, short events, Deadline deadline);
// Writes every byte of `parts` (gathered with sendmsg; the parts are advanced as they go) under
// a deadline. Throws ConnectionClosed or TimeoutError; `peer` names the other end.
void writeAllV(int fd, std::span<iovec> parts, Deadline deadline, const std::string& peer);

void setNonBlocking(int fd, bool on);
void setNoDelay(int fd);
void setBufferSizes(int fd, int bytes);

// Throws SystemError with the call's name and errno's text.
[[noreturn]] void throwErrno(const std::string& what);

}  // namespace gyre::net
