#include "common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <thread>

#include "common/check.h"

namespace gyre::net {
namespace {

// Longest sleep between two connection attempts.
constexpr std::chrono::milliseconds kMaxBackoff{200};

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for a TCP socket; an empty host means loopback. Returns null and sets `error`
// when the name does not resolve.
AddrInfoPtr resolve(const std::string& host, std::uint16_t port, bool passive, int* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* result = nullptr;
  *error = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  return AddrInfoPtr(*error == 0 ? result : nullptr);
}

std::string hostOf(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  } else {
    return "?";
  }
  return buf;
}

std::uint16_t portOf(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

// The peer of fd for error messages; never throws.
std::string describePeer(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "fd " + std::to_string(fd);
  const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
  return joinHostPort(hostOf(sa), portOf(sa));
}

bool isRetryableConnectError(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ENOENT:
    case ETIMEDOUT:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
    case EAGAIN:
    case EINTR:
      return true;
    default:
      return false;
  }
}

// One attempt to connect to `ai` before the deadline. Returns the connected socket, or an
// invalid Fd with *err set.
Fd tryConnect(const addrinfo* ai, Deadline deadline, int* err) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
  if (!fd.valid()) throwErrno("socket");
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return Fd();
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int r = ::poll(&p, 1, deadline.remainingMs());
    if (r < 0 && errno != EINTR) throwErrno("poll");
    if (r <= 0) {
      *err = ETIMEDOUT;
      return Fd();
    }
    int soError = 0;
    socklen_t len = sizeof(soError);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soError, &len) != 0) throwErrno("getsockopt(SO_ERROR)");
    if (soError != 0) {
      *err = soError;
      return Fd();
    }
  }
  // On loopback, connecting to a free ephemeral port can connect the socket to itself (TCP
  // simultaneous open); treat that as refused.
  sockaddr_storage local{}, peer{};
  socklen_t localLen = sizeof(local), peerLen = sizeof(peer);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &localLen) == 0 &&
      getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &peerLen) == 0 && localLen == peerLen &&
      std::memcmp(&local, &peer, localLen) == 0) {
    *err = ECONNREFUSED;
    return Fd();
  }
  return fd;
}


}  // namespace

bool waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.remainingMs());
    if (r > 0) {
      if (p.revents & POLLNVAL) GYRE_THROW(SystemError, "poll: fd ", fd, " is not open");
      return true;
    }
    if (r == 0) return false;
    if (errno != EINTR) throwErrno("poll");
  }
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void throwErrno(const std::string& what) {
  const int err = errno;
  throw SystemError(what + ": " + std::strerror(err));
}

std::pair<std::string, std::uint16_t> splitHostPort(const std::string& address) {
  std::string host;
  std::string portText;
  if (!address.empty() && address.front() == '[') {
    const auto close = address.find(']');
    GYRE_ARG_CHECK(close != std::string::npos && close + 1 < address.size() && address[close + 1] == ':',
                   "malformed address '", address, "': expected [v6]:port");
    host = address.substr(1, close - 1);
    portText = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    GYRE_ARG_CHECK(colon != std::string::npos, "malformed address '", address, "': expected host:port");
    host = address.substr(0, colon);
    portText = address.substr(colon + 1);
    GYRE_ARG_CHECK(host.find(':') == std::string::npos, "malformed address '", address,
                   "': bracket IPv6 literals, as in [::1]:port");
  }
  GYRE_ARG_CHECK(!host.empty(), "malformed address '", address, "': empty host");
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  GYRE_ARG_CHECK(
      ec == std::errc() && end == portText.data() + portText.size() && !portText.empty() && port <= 65535,
      "malformed address '", address, "': port must be a number in [0, 65535]");
  return {host, static_cast<std::uint16_t>(port)};
}

std::string joinHostPort(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string resolveInterface(const std::string& nameOrAddress) {
  GYRE_ARG_CHECK(!nameOrAddress.empty(), "empty interface name");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwErrno("getifaddrs");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  std::string v6;
  bool found = false;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_name == nullptr || nameOrAddress != it->ifa_name) continue;
    found = true;
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family == AF_INET) return hostOf(it->ifa_addr);
    if (it->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      v6 = hostOf(it->ifa_addr);
      // A link-local address is only usable with its scope.
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) v6 += "%" + nameOrAddress;
    }
  }
  if (!v6.empty()) return v6;
  GYRE_ARG_CHECK(!found, "interface '", nameOrAddress, "' has no IPv4 or IPv6 address");
  int error = 0;
  if (resolve(nameOrAddress, 0, false, &error)) return nameOrAddress;
  GYRE_THROW(InvalidArgument, "'", nameOrAddress,
             "' is neither a network interface nor a resolvable address (", gai_strerror(error), ")");
}

std::vector<std::string> externalAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwErrno("getifaddrs");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  std::vector<std::string> v4, v6;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (it->ifa_addr->sa_family == AF_INET) v4.push_back(hostOf(it->ifa_addr));
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
    if (it->ifa_addr->sa_family == AF_INET6 && !IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr))
      v6.push_back(hostOf(it->ifa_addr));
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

Fd listenOn(const std::string& host, std::uint16_t port, int backlog) {
  int error = 0;
  AddrInfoPtr list = resolve(host, port, false, &error);
  GYRE_ARG_CHECK(list != nullptr, "cannot resolve listen address '", host, "': ", gai_strerror(error));
  std::string lastError = "no addresses";
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) throwErrno("socket");
    int one = 1;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
      throwErrno("setsockopt(SO_REUSEADDR)");
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      lastError = std::strerror(errno);
      continue;
    }
    return fd;
  }
  GYRE_THROW(SystemError, "cannot listen on ", joinHostPort(host, port), ": ", lastError);
}

std::string localHost(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throwErrno("getsockname");
  return hostOf(reinterpret_cast<const sockaddr*>(&ss));
}

std::uint16_t localPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throwErrno("getsockname");
  return portOf(reinterpret_cast<const sockaddr*>(&ss));
}

std::string peerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throwErrno("getpeername");
  const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
  return joinHostPort(hostOf(sa), portOf(sa));
}

Fd connectTo(const std::string& host, std::uint16_t port, Deadline deadline) {
  const std::string address = joinHostPort(host, port);
  const auto start = Clock::now();
  std::chrono::milliseconds backoff{5};
  std::string lastError = "no attempt made";
  for (;;) {
    int error = 0;
    AddrInfoPtr list = resolve(host, port, false, &error);
    if (list == nullptr) {
      // A temporary resolver failure is retried like a refused connection.
      GYRE_ARG_CHECK(error == EAI_AGAIN, "cannot resolve '", host, "': ", gai_strerror(error));
      lastError = gai_strerror(error);
    }
    for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
      int err = 0;
      Fd fd = tryConnect(ai, deadline, &err);
      if (fd.valid()) {
        setNonBlocking(fd.get(), false);
        setNoDelay(fd.get());
        return fd;
      }
      lastError = std::strerror(err);
      if (!isRetryableConnectError(err))
        GYRE_THROW(SystemError, "cannot connect to ", address, ": ", lastError);
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(backoff, std::chrono::milliseconds(deadline.remainingMs())));
    backoff = std::min(backoff * 2, kMaxBackoff);
    if (deadline.expired()) break;
  }
  GYRE_THROW(TimeoutError, "timed out connecting to ", address, " after ",
             static_cast<int>(secondsSince(start) * 1000), " ms (last error: ", lastError, ")");
}

Fd acceptOne(int listenFd, Deadline deadline) {
  for (;;) {
    if (!waitFor(listenFd, POLLIN, deadline)) GYRE_THROW(TimeoutError, "timed out waiting for a connection");
    Fd fd(::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      setNoDelay(fd.get());
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      throwErrno("accept");
  }
}

void writeAll(int fd, const void* data, std::size_t n, Deadline deadline) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t done = 0;
  while (done < n) {
    ssize_t w = ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
      throw ConnectionClosed("connection to " + describePeer(fd) + " closed while writing (" +
                             std::to_string(done) + " of " + std::to_string(n) + " bytes sent)");
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throwErrno("send");
    if (!waitFor(fd, POLLOUT, deadline))
      GYRE_THROW(TimeoutError, "timed out writing to ", describePeer(fd), " (", done, " of ", n,
                 " bytes sent)");
  }
}

void readAll(int fd, void* data, std::size_t n, Deadline deadline) {
  auto* p = static_cast<std::uint8_t*>(data);
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0 || errno == ECONNRESET)
      throw ConnectionClosed("connection to " + describePeer(fd) + " closed while reading (" +
                             std::to_string(done) + " of " + std::to_string(n) + " bytes received)");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throwErrno("recv");
    if (!waitFor(fd, POLLIN, deadline))
      GYRE_THROW(TimeoutError, "timed out reading from ", describePeer(fd), " (", done, " of ", n,
                 " bytes received)");
  }
}

void setNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) throwErrno("fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) throwErrno("fcntl(F_SETFL)");
}

void setNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) throwErrno("setsockopt(TCP_NODELAY)");
}

void setBufferSizes(int fd, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0) throwErrno("setsockopt(SO_SNDBUF)");
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) != 0) throwErrno("setsockopt(SO_RCVBUF)");
}

std::string hostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Writes every byte of `parts` (gathered), under a deadline. Throws net::ConnectionClosed or
// TimeoutError.
void writeAllV(int fd, std::span<iovec> parts, Deadline deadline, const std::string& peer) {
  std::size_t first = 0;
  while (first < parts.size()) {
    msghdr msg{};
    msg.msg_iov = parts.data() + first;
    msg.msg_iovlen = parts.size() - first;
    const ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EPIPE || errno == ECONNRESET) throw ConnectionClosed("connection to " + peer + " closed while writing");
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) throwErrno("sendmsg to " + peer);
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, deadline.remainingMs(1000));
      if (r < 0 && errno != EINTR) throwErrno("poll");
      if (r == 0 && deadline.expired()) GYRE_THROW(TimeoutError, "timed out writing to ", peer);
      continue;
    }
    auto left = static_cast<std::size_t>(w);
    while (first < parts.size() && left >= parts[first].iov_len) left -= parts[first++].iov_len;
    if (first < parts.size()) {
      parts[first].iov_base = static_cast<std::uint8_t*>(parts[first].iov_base) + left;
      parts[first].iov_len -= left;
    }
  }
}

}  // namespace gyre::net
