// The TCP store server's I/O. One thread runs a poll(2) loop over authenticated connections,
// with non-blocking I/O and a state per connection, so no client can stall another. Connections
// are accepted and authenticated by an AuthGate (common/auth_gate.h: one thread, thousands
// pending, the oldest evicted under a flood); only authenticated sockets join the loop.
// Requests go to a StoreService; a get/wait on missing keys parks its connection until the
// service hands back the answer (keys set, or time-out).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "common/auth_gate.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_service.h"

namespace gyre {
namespace {

using rendezvous::Request;
using rendezvous::Response;

// Stop reading requests from a client that does not read its responses.
constexpr std::size_t kMaxPendingOutput = 4 << 20;
constexpr std::size_t kReadChunk = 256 << 10;

struct Connection {
  std::uint64_t id = 0;
  net::Fd fd;
  std::string peer;
  std::vector<std::uint8_t> in;  // the frame being received, header included
  std::vector<std::uint8_t> out;
  std::size_t outSent = 0;
  bool parked = false;
  bool dead = false;
};

// "host:port" for clients; the host name for a wildcard listener.
std::string clientAddress(int listenFd, std::uint16_t port) {
  std::string host = net::localHost(listenFd);
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  return net::joinHostPort(host, port);
}

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(std::string secret, const std::string& bindAddress, std::uint16_t port)
      : secret_(std::move(secret)),
        listen_(net::listenOn(bindAddress, port)),
        port_(net::localPort(listen_.get())),
        address_(clientAddress(listen_.get(), port_)),
        service_("tcp store " + address_) {
    wake_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) net::throwErrno("eventfd");
    thread_ = std::thread([this] { loop(); });
    gate_ = std::make_unique<auth::AuthGate>(
        listen_.get(),
        auth::GateOptions{.secret = secret_, .context = std::string(rendezvous::kStoreAuthContext),
                          .name = "tcp store " + address_},
        [this](net::Fd fd, const std::string& peer) { adopt(std::move(fd), peer); });
  }

  ~TcpStoreServerImpl() override {
    gate_.reset();  // first: it hands connections to the loop
    stopping_ = true;
    signal();
    thread_.join();
  }

  std::uint16_t port() const override { return port_; }
  std::string address() const override { return address_; }
  std::uint64_t refusedConnections() const override {
    return refused_.load() + (gate_ ? gate_->stats().refused : 0);
  }

 private:
  void signal() {
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
    (void)ignored;
  }

  void refuse(const std::string& peer, const std::string& why) {
    refused_.fetch_add(1);
    log::warn("tcp store ", address_, ": refused connection from ", peer, ": ", why);
  }

  void loop() {
    while (!stopping_) {
      try {
        step();
      } catch (const std::exception& e) {
        // Only the loop's own resources can fail here (poll, accept); keep serving.
        log::error("tcp store ", address_, ": ", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  void step() {
    std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}};
    std::vector<Connection*> order;
    for (auto& [id, c] : connections_) {
      short events = 0;
      // A parked connection is polled too, to notice its client leaving (see receive()).
      if (c->parked || c->out.size() - c->outSent < kMaxPendingOutput) events |= POLLIN;
      if (c->outSent < c->out.size()) events |= POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
      order.push_back(c.get());
    }
    int timeoutMs = 1000;
    if (const auto next = service_.nextDeadline()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count() + 1;
      timeoutMs = static_cast<int>(std::clamp<std::int64_t>(left, 0, timeoutMs));
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0) {
      if (errno == EINTR) return;
      net::throwErrno("poll");
    }
    if (fds[0].revents & POLLIN) adoptAuthenticated();
    for (std::size_t i = 0; i < order.size(); ++i) {
      Connection& c = *order[i];
      const short ev = fds[i + 1].revents;
      if (ev & POLLOUT) flush(c);
      if (!c.dead && (ev & (POLLIN | POLLHUP | POLLERR))) receive(c);
    }
    deliver(service_.expire(Clock::now()));
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->second->dead) {
        service_.forget(it->first);
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // On the gate's thread: queue the connection for the loop.
  void adopt(net::Fd fd, const std::string& peer) {
    net::setNonBlocking(fd.get(), true);
    net::setNoDelay(fd.get());
    {
      MutexLock lock(mutex_);
      authenticated_.emplace_back(std::move(fd), peer);
    }
    signal();
  }

  void adoptAuthenticated() {
    std::uint64_t drained = 0;
    ssize_t ignored = ::read(wake_.get(), &drained, sizeof(drained));
    (void)ignored;
    MutexLock lock(mutex_);
    for (auto& [fd, peer] : authenticated_) {
      auto c = std::make_unique<Connection>();
      c->id = nextId_++;
      c->fd = std::move(fd);
      c->peer = peer;
      log::debug("tcp store ", address_, ": client ", peer, " authenticated");
      connections_.emplace(c->id, std::move(c));
    }
    authenticated_.clear();
  }

  // Reads what is available and serves every complete frame.
  void receive(Connection& c) {
    if (c.parked) {
      // A client waiting for its answer sends nothing: EOF means it left, data breaks protocol.
      std::uint8_t byte = 0;
      const ssize_t r = ::recv(c.fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (r > 0) {
        refuse(c.peer, "sent a request while its previous one was still waiting");
      } else {
        log::debug("tcp store ", address_, ": client ", c.peer, " left while waiting");
      }
      c.dead = true;
      return;
    }
    std::uint8_t buf[16 << 10];
    std::size_t budget = 8 * kReadChunk;  // fairness between clients
    while (!c.dead && !c.parked && budget > 0) {
      // Read no further than the current frame, so a frame's claimed length is checked first.
      std::size_t want = rendezvous::kFrameHeaderBytes;
      if (c.in.size() >= rendezvous::kFrameHeaderBytes) want += parseOrRefuse(c);
      if (c.dead) return;
      if (c.in.size() == want) {
        serveFrame(c);
        continue;
      }
      const std::size_t n = std::min({want - c.in.size(), sizeof(buf), budget});
      const ssize_t r = ::recv(c.fd.get(), buf, n, MSG_DONTWAIT);
      if (r > 0) {
        c.in.insert(c.in.end(), buf, buf + r);
        budget -= static_cast<std::size_t>(r);
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (!c.in.empty()) {
        refuse(c.peer, "connection closed in the middle of a frame (" + std::to_string(c.in.size()) + " of " +
                           std::to_string(want) + " bytes)");
      } else {
        log::debug("tcp store ", address_, ": client ", c.peer, " disconnected");
      }
      c.dead = true;
    }
  }

  std::size_t parseOrRefuse(Connection& c) {
    try {
      return rendezvous::parseFrameHeader(c.in.data());
    } catch (const ProtocolError& e) {
      refuse(c.peer, e.what());
      c.dead = true;
      return 0;
    }
  }

  void serveFrame(Connection& c) {
    Request request;
    try {
      request = rendezvous::decodeRequest(
          std::span<const std::uint8_t>(c.in).subspan(rendezvous::kFrameHeaderBytes));
    } catch (const ProtocolError& e) {
      refuse(c.peer, std::string("malformed request: ") + e.what());
      c.dead = true;
      return;
    }
    c.in.clear();
    log::debug("tcp store ", address_, ": ", c.peer, " ", request.debugString());
    if (auto response = service_.serve(c.id, std::move(request))) {
      respond(c, *response);
    } else {
      c.parked = true;
    }
    deliver(service_.takeReady());
  }

  void respond(Connection& c, const Response& response) {
    const auto frame = rendezvous::encodeFrame(response);
    if (c.outSent == c.out.size()) {
      c.out.clear();
      c.outSent = 0;
    }
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    flush(c);
  }

  void flush(Connection& c) {
    while (!c.dead && c.outSent < c.out.size()) {
      const ssize_t w =
          ::send(c.fd.get(), c.out.data() + c.outSent, c.out.size() - c.outSent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        c.outSent += static_cast<std::size_t>(w);
      } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
      } else {
        log::debug("tcp store ", address_, ": client ", c.peer, " went away while being answered");
        c.dead = true;
      }
    }
  }

  // Answers the parked requests that became due, and serves what their clients sent since.
  void deliver(std::vector<rendezvous::StoreService::Answer> answers) {
    for (auto& a : answers) {
      auto it = connections_.find(a.client);
      if (it == connections_.end()) continue;
      it->second->parked = false;
      respond(*it->second, a.response);
    }
    for (const auto& a : answers) {
      auto it = connections_.find(a.client);
      if (it != connections_.end() && !it->second->dead) receive(*it->second);
    }
  }

  const std::string secret_;
  net::Fd listen_;
  const std::uint16_t port_;
  const std::string address_;
  net::Fd wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> refused_{0};

  // Shared with the gate's thread.
  Mutex mutex_;
  std::vector<std::pair<net::Fd, std::string>> authenticated_ GYRE_GUARDED_BY(mutex_);

  // The loop thread's own.
  std::map<std::uint64_t, std::unique_ptr<Connection>> connections_;
  rendezvous::StoreService service_;
  std::uint64_t nextId_ = 1;

  std::thread thread_;  // starts after everything above exists
  std::unique_ptr<auth::AuthGate> gate_;  // last: starts once the loop runs
};

}  // namespace

std::unique_ptr<TcpStoreServer> createTcpStoreServer(const std::string& secret,
                                                     const std::string& bindAddress, std::uint16_t port) {
  return std::make_unique<TcpStoreServerImpl>(secret, bindAddress, port);
}

}  // namespace gyre
