#include "metrics/server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "gyre/errors.h"

namespace gyre::metrics {
namespace {

[[noreturn]] void cannotListen(const std::string& address, int port, const std::string& flag, int error) {
  throw Error(flag + " " + std::to_string(port) + ": cannot listen on " + address + ":" +
              std::to_string(port) + ": " +
              (error != 0 ? std::strerror(error) : "the address is not usable") +
              (error == EADDRINUSE ? " (another process serves there; pick another port)" : ""));
}

// SO_REUSEADDR alone: cpp-httplib's default adds SO_REUSEPORT, which would let a second server
// share a port that is in use instead of failing.
void reuseAddressOnly(httplib::Server& http) {
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

}  // namespace

Server::Server(const std::string& address, int port, std::function<std::string()> render,
               const std::string& flag)
    : http_(std::make_unique<httplib::Server>()) {
  http_->Get("/metrics", [render = std::move(render)](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->set_keep_alive_max_count(100);
  // An idle keep-alive connection (Prometheus keeps one) holds stop() up to this long.
  http_->set_keep_alive_timeout(1);
  port_ = bindHttp(*http_, address, port, flag);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() is a no-op until the loop runs: wait for it, so that the destructor cannot miss it.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!http_->is_running()) {
    http_->stop();
    thread_.join();
    throw Error(flag + " " + std::to_string(port_) + ": the server on " + address + " did not start serving");
  }
}

int bindHttp(httplib::Server& http, const std::string& address, int port, const std::string& flag) {
  reuseAddressOnly(http);
  errno = 0;
  if (port == 0) {
    const int got = http.bind_to_any_port(address);
    if (got <= 0) cannotListen(address, port, flag, errno);
    return got;
  }
  if (!http.bind_to_port(address, port)) cannotListen(address, port, flag, errno);
  return port;
}

Server::~Server() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

int listenTcp(const std::string& address, int port, const std::string& flag, int backlog, int& bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr)
    cannotListen(address, port, flag, 0);
  int error = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  int yes = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0 ||
      ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, backlog) != 0)
    error = errno;
  ::freeaddrinfo(found);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (error == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) error = errno;
  if (error != 0) {
    if (fd >= 0) ::close(fd);
    cannotListen(address, port, flag, error);
  }
  bound = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(local).sin6_port
                                            : reinterpret_cast<const sockaddr_in&>(local).sin_port);
  return fd;
}

void checkPortFree(const std::string& address, int port, const std::string& flag) {
  // A socket of our own, closed on return (an httplib::Server that never listened keeps its
  // socket open until the process ends).
  int bound = 0;
  ::close(listenTcp(address, port, flag, 1, bound));
}

}  // namespace gyre::metrics
