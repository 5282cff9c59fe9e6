#include "serve/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/mutex.h"
#include "gyre/errors.h"
#include "metrics/server.h"  // listenTcp

namespace gyre::serve {

using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kListenId = 0;
constexpr std::uint64_t kOutboxId = 1;
constexpr auto kSweepEvery = std::chrono::milliseconds(50);
// A connection closed after a refusal is read (and what it sends discarded) this long first, so
// that the client reads the answer instead of a reset.
constexpr auto kLinger = std::chrono::seconds(2);
constexpr std::size_t kReadAhead = 256 * 1024;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : "Error";
  }
}

std::string serialize(const HttpResponse& r, bool keepAlive, bool head) {
  std::string out;
  out.reserve(r.body.size() + 160);
  out += "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  out += "Content-Type: " + r.contentType + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head) out += r.body;  // a HEAD's answer has the GET's headers and no body
  return out;
}

// Room for the connections: the soft limit on descriptors raised toward the hard one.
void allowDescriptors(int connections) {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return;
  const rlim_t want = static_cast<rlim_t>(connections) + HttpServer::kOverflowConnections + 256;
  if (l.rlim_cur >= want) return;
  l.rlim_cur = std::min(want, l.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &l);
}

}  // namespace

struct HttpServer::Connection {
  enum class State { kReading, kHandling, kWriting, kLingering };

  Connection(int socket, std::uint64_t key, const HttpLimits& limits) : fd(socket), id(key), parser(limits) {}
  ~Connection() { ::close(fd); }

  int fd;
  std::uint64_t id;
  RequestParser parser;
  std::string in;          // read, from `at` on not yet parsed
  std::size_t at = 0;
  std::string out;
  std::size_t written = 0;
  State state = State::kReading;
  std::uint32_t events = 0;  // in the epoll set now
  bool overflow = false;     // beyond maxConnections: answered 503
  bool eof = false;          // the client sent FIN
  bool keepAlive = true;     // after the answer being written
  bool linger = false;       // a refusal: read out what the client sends before closing
  bool head = false;         // the request being answered is a HEAD: the answer has no body
  bool timing = false;       // requestStart is the current request's first byte
  Clock::time_point requestStart{};
  Clock::time_point deadline{};  // idle (reading, nothing begun), writing, or lingering
};

// Answers from any thread, picked up by the loop (woken through an eventfd).
struct HttpServer::Outbox {
  Outbox() : wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (wake < 0) throw Error(std::string("gyre serve: eventfd: ") + std::strerror(errno));
  }
  ~Outbox() { ::close(wake); }

  void post(std::uint64_t id, HttpResponse r) GYRE_EXCLUDES(mu) {
    bool first = false;
    {
      MutexLock lock(mu);
      first = items.empty();
      items.emplace_back(id, std::move(r));
    }
    if (first) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(wake, &one, sizeof one);
    }
  }

  std::vector<std::pair<std::uint64_t, HttpResponse>> takeAll() GYRE_EXCLUDES(mu) {
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake, &count, sizeof count);
    std::vector<std::pair<std::uint64_t, HttpResponse>> taken;
    MutexLock lock(mu);
    taken.swap(items);
    return taken;
  }

  const int wake;
  Mutex mu;
  std::vector<std::pair<std::uint64_t, HttpResponse>> items GYRE_GUARDED_BY(mu);
};

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : o_(std::move(options)), handler_(std::move(handler)), outbox_(std::make_shared<Outbox>()) {
  if (!o_.refusal)
    o_.refusal = [](int status, const std::string& why) { return HttpResponse{status, "text/plain", why, {}, true}; };
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw Error(std::string("gyre serve: epoll_create1: ") + std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kOutboxId;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, outbox_->wake, &e);
  allowDescriptors(o_.maxConnections);
}

HttpServer::~HttpServer() {
  connections_.clear();
  if (listen_ >= 0) ::close(listen_);
  ::close(epoll_);
}

int HttpServer::listen(const std::string& host, int port, const std::string& flag) {
  int bound = 0;
  listen_ = metrics::listenTcp(host, port, flag, SOMAXCONN, bound);
  ::fcntl(listen_, F_SETFL, ::fcntl(listen_, F_GETFL) | O_NONBLOCK);
  resumeAccepting();
  return bound;
}

void HttpServer::stop() {
  stopRequested_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(outbox_->wake, &one, sizeof one);
}

void HttpServer::resumeAccepting() {
  if (accepting_ || listen_ < 0 || stopping_) return;
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenId;
  accepting_ = ::epoll_ctl(epoll_, EPOLL_CTL_ADD, listen_, &e) == 0;
}

void HttpServer::interest(Connection& c, std::uint32_t events) {
  if (c.events == events) return;
  epoll_event e{};
  e.events = events;
  e.data.u64 = c.id;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &e);
  c.events = events;
}

void HttpServer::serve() {
  std::array<epoll_event, 128> events{};
  Clock::time_point swept = Clock::now();
  while (true) {
    if (stopRequested_ && !stopping_) beginStopping();
    if (stopping_ && connections_.empty() && pending_ == 0) break;
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(kSweepEvery.count()));
    if (n < 0 && errno != EINTR) throw Error(std::string("gyre serve: epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        accept();
      } else if (id == kOutboxId) {
        deliver();
      } else if (const auto it = connections_.find(id); it != connections_.end()) {
        onEvent(*it->second, events[i].events);
      }
    }
    if (Clock::now() - swept >= kSweepEvery) {
      sweep();
      swept = Clock::now();
    }
  }
}

void HttpServer::beginStopping() {
  stopping_ = true;
  if (listen_ >= 0) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_, nullptr);
    ::close(listen_);
    listen_ = -1;
    accepting_ = false;
  }
  // A request not read whole was not accepted: its connection goes with the idle ones.
  std::vector<std::uint64_t> idle;
  for (const auto& [id, c] : connections_)
    if (c->state == Connection::State::kReading || c->state == Connection::State::kLingering) idle.push_back(id);
  for (const std::uint64_t id : idle) close(id);
}

void HttpServer::accept() {
  const Clock::time_point now = Clock::now();
  while (!stopping_) {
    if (served_ >= o_.maxConnections && overflow_ >= kOverflowConnections) {
      // Full: new connections wait in the backlog until one of these closes.
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_, nullptr);
      accepting_ = false;
      return;
    }
    const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: try again a little later rather than spin on the ready socket.
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_, nullptr);
        accepting_ = false;
        acceptPausedUntil_ = now + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN, or a connection that went away before it was taken
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // answers go out at once
    const std::uint64_t id = nextId_++;
    auto c = std::make_unique<Connection>(fd, id, o_.limits);
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = id;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e) != 0) continue;  // closes it
    c->events = EPOLLIN;
    c->deadline = now + o_.idleTimeout;
    Connection& conn = *connections_.emplace(id, std::move(c)).first->second;
    if (served_ < o_.maxConnections) {
      ++served_;
    } else {
      ++overflow_;
      conn.overflow = true;
      refused_.fetch_add(1);
      respond(conn, o_.refusal(503, o_.overflowMessage), true);
    }
  }
}

void HttpServer::onEvent(Connection& c, std::uint32_t events) {
  const std::uint64_t id = c.id;
  if ((events & EPOLLERR) != 0) return close(id);
  if ((events & EPOLLOUT) != 0 && c.state == Connection::State::kWriting) {
    flush(c);
    if (!connections_.contains(id)) return;
  }
  if ((events & (EPOLLIN | EPOLLHUP)) == 0) return;
  // Hung up both ways while its request is handled or answered: nothing can reach it any more.
  if ((events & EPOLLHUP) != 0 && (c.state == Connection::State::kHandling || c.state == Connection::State::kWriting))
    return close(id);
  if (c.at > 0) {  // what the parser took goes, once per event (not once per request)
    c.in.erase(0, c.at);
    c.at = 0;
  }
  std::array<char, 64 * 1024> buffer;
  while (true) {
    const ssize_t n = ::recv(c.fd, buffer.data(), buffer.size(), 0);
    if (n > 0) {
      if (c.state != Connection::State::kLingering) c.in.append(buffer.data(), static_cast<std::size_t>(n));
      // Read ahead of the parser only this far: the rest waits in the kernel (the event fires
      // again), so a connection holds its request's body and little more.
      if (c.in.size() > kReadAhead) break;
      continue;
    }
    if (n == 0) {
      c.eof = true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return close(id);  // reset
    }
    break;
  }
  if (c.state == Connection::State::kLingering) {
    if (c.eof) close(id);
    return;
  }
  if (c.state == Connection::State::kReading) advance(c);
  else if (c.eof) interest(c, 0);  // the answer still goes out; nothing more to read
}

// Parses what has arrived: a whole request goes to the handler; a bad one is refused.
void HttpServer::advance(Connection& c) {
  while (c.state == Connection::State::kReading) {
    std::size_t used = 0;
    const RequestParser::Progress p = c.parser.feed(std::string_view(c.in).substr(c.at), used);
    c.at += used;
    if (c.parser.begun() && !c.timing) {
      c.timing = true;
      c.requestStart = Clock::now();
    }
    switch (p) {
      case RequestParser::Progress::kHeaders:
        // A client that waits for leave to send its body (curl does, for bodies over 1 KiB) gets it.
        if (c.parser.head().minorVersion == 1 && c.parser.head().expectsContinue() && c.parser.awaitingBody() &&
            c.at == c.in.size()) {
          constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] const ssize_t n = ::send(c.fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL);
        }
        continue;
      case RequestParser::Progress::kMore:
        if (c.eof) return close(c.id);
        return;
      case RequestParser::Progress::kFailed:
        return respond(c, o_.refusal(c.parser.status(), c.parser.error()), true);
      case RequestParser::Progress::kDone: {
        HttpRequest request = c.parser.take();
        c.timing = false;
        // A client that half-closed after its requests still gets each answer; the connection
        // closes once nothing whole is left to parse.
        c.keepAlive = request.keepAlive();
        c.head = request.method == "HEAD";
        c.state = Connection::State::kHandling;
        interest(c, 0);  // what the client sends next waits until this is answered
        ++pending_;
        const std::shared_ptr<Outbox> outbox = outbox_;
        const std::uint64_t id = c.id;
        auto answered = std::make_shared<std::atomic<bool>>(false);
        Reply reply = [outbox, id, answered](HttpResponse r) {
          if (!answered->exchange(true)) outbox->post(id, std::move(r));
        };
        try {
          handler_(std::move(request), reply);
        } catch (const std::exception& e) {
          reply(o_.refusal(500, e.what()));
        }
        // An answer given at once goes out on the loop's next turn (through the outbox), not from
        // here: a client pipelining many requests would otherwise recurse through them.
        return;
      }
    }
  }
}

void HttpServer::deliver() {
  for (auto& [id, response] : outbox_->takeAll()) {
    --pending_;
    const auto it = connections_.find(id);
    if (it == connections_.end() || it->second->state != Connection::State::kHandling) continue;  // gone
    respond(*it->second, std::move(response), false);
  }
}

void HttpServer::respond(Connection& c, HttpResponse response, bool linger) {
  c.keepAlive = c.keepAlive && !response.close && !linger && !stopping_;  // an overflow's 503 lingers
  c.linger = linger;
  if (linger) {
    c.in.clear();  // what the client sent is not read as a request
    c.at = 0;
    c.timing = false;
    c.head = false;
  }
  c.out = serialize(response, c.keepAlive, c.head);
  c.written = 0;
  c.state = Connection::State::kWriting;
  c.deadline = Clock::now() + o_.requestTimeout;
  flush(c);
}

void HttpServer::flush(Connection& c) {
  while (c.written < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
    if (n > 0) {
      c.written += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return interest(c, EPOLLOUT);
    return close(c.id);
  }
  c.out.clear();
  c.written = 0;
  if (c.keepAlive && !stopping_) return keepReading(c);
  ::shutdown(c.fd, SHUT_WR);
  int unread = 0;
  if (c.eof || (!c.linger && (::ioctl(c.fd, FIONREAD, &unread) != 0 || unread == 0))) return close(c.id);
  // A refusal, or bytes the client sent that were not read: they are read and dropped for a
  // while before the close, so that the client reads the answer rather than a reset.
  c.state = Connection::State::kLingering;
  c.deadline = Clock::now() + kLinger;
  interest(c, EPOLLIN);
}

void HttpServer::keepReading(Connection& c) {
  if (c.in.capacity() > 4 * kReadAhead && c.in.size() - c.at < kReadAhead) {  // after a large body
    c.in.erase(0, c.at);
    c.at = 0;
    c.in.shrink_to_fit();
  }
  c.state = Connection::State::kReading;
  c.deadline = Clock::now() + o_.idleTimeout;
  interest(c, EPOLLIN);
  advance(c);  // a request pipelined behind the last one
}

void HttpServer::close(std::uint64_t id) {
  const auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second->overflow) --overflow_;
  else --served_;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  connections_.erase(it);
  if (!accepting_ && Clock::now() >= acceptPausedUntil_) resumeAccepting();
}

void HttpServer::sweep() {
  const Clock::time_point now = Clock::now();
  if (!accepting_ && now >= acceptPausedUntil_ &&
      (served_ < o_.maxConnections || overflow_ < kOverflowConnections))
    resumeAccepting();
  std::vector<std::uint64_t> late;
  std::vector<Connection*> slow;
  for (const auto& [id, c] : connections_) {
    switch (c->state) {
      case Connection::State::kReading:
        if (c->timing && now - c->requestStart > o_.requestTimeout) slow.push_back(c.get());
        else if (!c->timing && now > c->deadline) late.push_back(id);
        break;
      case Connection::State::kWriting:
      case Connection::State::kLingering:
        if (now > c->deadline) late.push_back(id);
        break;
      case Connection::State::kHandling: break;
    }
  }
  for (Connection* c : slow) respond(*c, o_.refusal(408, o_.timeoutMessage), true);
  for (const std::uint64_t id : late) close(id);
}

}  // namespace gyre::serve
