// The HTTP endpoint Prometheus scrapes: GET /metrics answers the text of `render()` (called on the
// server's thread for each scrape; it must be thread-safe), with Prometheus's content type. Built
// on cpp-httplib (Debian's libcpp-httplib-dev). Anything else is 404.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace gyre::metrics {

class Server {
 public:
  // Listens on `address`:`port` (port 0: one the kernel picks; see port()) before it returns, and
  // serves from a thread of its own. Throws gyre::Error naming the address and the flag when it
  // cannot listen (a port in use, say), so the caller stops before any work starts.
  Server(const std::string& address, int port, std::function<std::string()> render, const std::string& flag);
  ~Server();  // stops serving; a scrape in progress is finished
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

// Binds `http` to `address`:`port` (port 0: one the kernel picks) with SO_REUSEADDR alone (httplib's
// default adds SO_REUSEPORT, which would let a second server share a port in use) and returns the
// port. Throws like Server. For the HTTP servers of gyre (this one, gyre serve's).
int bindHttp(httplib::Server& http, const std::string& address, int port, const std::string& flag);

// A listening TCP socket on `address`:`port` (port 0: one the kernel picks, set in `bound`), with
// SO_REUSEADDR alone and close-on-exec; the caller owns the descriptor. Throws like Server.
int listenTcp(const std::string& address, int port, const std::string& flag, int backlog, int& bound);

// Checks that `port` can be listened on at `address` now (binds and closes), for a launcher that
// passes the port to a worker: the error comes before anything starts. Throws like Server.
void checkPortFree(const std::string& address, int port, const std::string& flag);

}  // namespace gyre::metrics
