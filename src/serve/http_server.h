// gyre serve's ingress: an HTTP/1.1 server on one epoll loop. Connections cost a descriptor and
// their buffers, not a thread: the loop reads, parses (http_request.h) and writes every one, and
// hands each complete request to the handler, which answers it through its Reply from any thread
// (a replica's, once its batch is computed). So the limits hold whatever clients do:
//   - a request must arrive whole within requestTimeout of its first byte (a slow-loris client
//     that trickles bytes is answered 408 and closed then); an idle keep-alive connection is
//     closed after idleTimeout;
//   - maxConnections connections are served at once; up to kOverflowConnections more are
//     answered at once with a 503 and closed; beyond those the loop stops accepting (new
//     connections wait in the kernel's backlog) until one closes;
//   - a body over its limit is refused (413) as soon as its headers announce it, unread.
// Refusals are the caller's `refusal` answers (JSON errors, in gyre serve). Requests on one
// connection are answered in order, one at a time (pipelined ones wait their turn).
// stop() stops accepting and closes idle connections; serve() returns once every request handed
// to the handler has been answered and written. libtorch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serve/http_request.h"

namespace gyre::serve {

struct HttpResponse {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beside Content-Type, -Length and Connection
  bool close = false;                                        // close the connection after it
};

struct HttpServerOptions {
  HttpLimits limits;
  int maxConnections = 64;
  std::chrono::milliseconds requestTimeout{5000};  // a request's first byte to its last; a response's write
  std::chrono::milliseconds idleTimeout{5000};     // a keep-alive connection between requests
  std::string timeoutMessage = "the request did not arrive in time";
  std::string overflowMessage = "too many connections; try again";
  // The answer to a request refused before the handler sees it (its status and why).
  std::function<HttpResponse(int status, const std::string& why)> refusal;
};

class HttpServer {
 public:
  static constexpr int kOverflowConnections = 16;

  // Answers its request, once, from any thread; answering after serve() has returned does nothing.
  using Reply = std::function<void(HttpResponse)>;
  // Called on the loop's thread: it must not block (hand slow work to a thread of its own).
  using Handler = std::function<void(HttpRequest&& request, Reply reply)>;

  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: a free one) and returns the port. Throws gyre::Error naming `flag`.
  int listen(const std::string& host, int port, const std::string& flag);
  // Runs the loop on this thread until stop(), then until every handed request is answered.
  void serve();
  // Any thread, before or during serve().
  void stop();

  // Connections answered 503 beyond maxConnections so far.
  std::uint64_t refused() const { return refused_.load(); }

 private:
  struct Connection;
  struct Outbox;

  void accept();
  void onEvent(Connection& c, std::uint32_t events);
  void advance(Connection& c);
  void respond(Connection& c, HttpResponse response, bool linger);
  void flush(Connection& c);
  void keepReading(Connection& c);
  void close(std::uint64_t id);
  void interest(Connection& c, std::uint32_t events);
  void deliver();
  void sweep();
  void beginStopping();
  void resumeAccepting();

  HttpServerOptions o_;
  Handler handler_;
  int epoll_ = -1;
  int listen_ = -1;
  bool accepting_ = false;  // the listening socket is in the epoll set
  std::chrono::steady_clock::time_point acceptPausedUntil_{};
  std::shared_ptr<Outbox> outbox_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> connections_;  // by id
  std::uint64_t nextId_ = 2;  // 0: the listening socket's events, 1: the outbox's
  int served_ = 0;    // connections within maxConnections
  int overflow_ = 0;  // connections being answered 503
  std::int64_t pending_ = 0;  // requests handed to the handler, not yet answered
  bool stopping_ = false;
  std::atomic<bool> stopRequested_{false};
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace gyre::serve
