// The parameter server's I/O. An AuthGate (common/auth_gate.h) accepts and authenticates on one
// thread, so an unauthenticated connection never gets a thread of its own; each authenticated
// connection gets one that reads requests with blocking reads, checks their framing (a
// structural violation closes the connection and counts as refused) and hands them to the
// ServerCore, which answers them, now or later, from whichever thread completes them. A reaper
// thread times out parked requests and joins the threads of closed connections. The destructor
// shuts every socket down and joins every thread.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <thread>

#include "common/auth_gate.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "gyre/ps.h"
#include "ps/server_core.h"

namespace gyre::ps {
namespace {

constexpr std::size_t kMaxConnections = 1024;
// A payload whose size cannot be checked yet (the table is not declared) is read and dropped up
// to this size; a larger one closes the connection.
constexpr std::uint64_t kMaxSkippedBytes = 64 << 20;

// "host:port" for clients; the host name for a wildcard listener.
std::string clientAddress(int listenFd, std::uint16_t port) {
  std::string host = net::localHost(listenFd);
  if (host == "0.0.0.0" || host == "::") host = net::hostName();
  return net::joinHostPort(host, port);
}

// Writes a header and a payload with one gathered send where the socket takes it, under a
// deadline. Throws net::ConnectionClosed, TimeoutError or SystemError.
void writeMessage(int fd, const std::uint8_t* head, std::span<const std::uint8_t> body, Deadline deadline) {
  iovec parts[2] = {{const_cast<std::uint8_t*>(head), kHeaderBytes},
                    {const_cast<std::uint8_t*>(body.data()), body.size()}};
  net::writeAllV(fd, std::span<iovec>(parts, body.empty() ? 1 : 2), deadline, "a ps client");
}

// An accepted connection: a worker, or a primary server replicating to this one.
class Connection final : public Peer {
 public:
  Connection(net::Fd fd, std::string name, ServerCore& core, std::chrono::milliseconds timeout)
      : fd_(std::move(fd)), name_(std::move(name)), core_(core), timeout_(timeout) {}

  void respond(Header header, std::span<const std::uint8_t> payload) override GYRE_EXCLUDES(writeMutex_) {
    header.response = true;
    header.payloadBytes = payload.size();
    std::uint8_t head[kHeaderBytes];
    encodeHeader(header, head);
    MutexLock lock(writeMutex_);
    if (dead_.load()) return;
    try {
      writeMessage(fd_.get(), head, payload, Deadline::after(timeout_));
      core_.countOut(kHeaderBytes + payload.size());
    } catch (const std::exception& e) {
      log::info(core_.name(), ": cannot answer ", name_, ": ", e.what());
      kill();
    }
  }
  bool dead() const override { return dead_.load(); }
  std::uint32_t worker() const override { return worker_.load(); }

  // Marks the connection dead and wakes its reader (shutdown(2); the descriptor stays open
  // until the last reference goes, so it is never reused under a writer).
  void kill() {
    dead_.store(true);
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  void setWorker(std::uint32_t worker) { worker_.store(worker); }

 private:
  net::Fd fd_;
  const std::string name_;
  ServerCore& core_;
  const std::chrono::milliseconds timeout_;
  Mutex writeMutex_;  // one response on the wire at a time
  std::atomic<bool> dead_{false};
  std::atomic<std::uint32_t> worker_{0};
};

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServerOptions& options)
      : options_(options),
        core_(options),
        listen_(net::listenOn(options.bindAddress, options.port)),
        address_(clientAddress(listen_.get(), net::localPort(listen_.get()))) {
    wake_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) net::throwErrno("eventfd");
    joiner_ = std::thread([this] { joinLoop(); });
    reaper_ = std::thread([this] { reapLoop(); });
    gate_ = std::make_unique<auth::AuthGate>(
        listen_.get(),
        auth::GateOptions{.secret = options_.secret, .context = std::string(kPsAuthContext), .name = core_.name()},
        [this](net::Fd fd, const std::string& peer) { startSession(std::move(fd), peer); });
    log::info(core_.name(), ": listening on ", address_);
  }

  ~ServerImpl() override {
    gate_.reset();  // no new sessions
    {
      MutexLock lock(reapMutex_);
      stopping_.store(true);
    }
    reapCv_.notifyAll();
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
    (void)ignored;
    joiner_.join();
    // Shut every connection down first: a thread writing to a client that reads nothing then
    // fails at once instead of waiting for its deadline.
    std::list<Session> sessions;
    {
      MutexLock lock(sessionsMutex_);
      for (Session& s : sessions_) s.connection->kill();
      sessions.splice(sessions.end(), sessions_);
    }
    reaper_.join();
    for (Session& s : sessions) s.thread.join();
    // core_ goes last: it closes the backup link, whose pending acknowledgements answer (dead)
    // connections.
  }

  std::string address() const override { return address_; }
  int index() const override { return options_.index; }
  ServerStats stats() const override {
    ServerStats s = core_.stats();
    if (gate_) s.refusedConnections += gate_->stats().refused;
    return s;
  }

 private:
  struct Session {
    std::shared_ptr<Connection> connection;
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  void refuse(const Connection& c, const std::string& why) {
    core_.countRefused();
    log::warn(core_.name(), ": refused connection from ", c.name(), ": ", why);
  }

  // Joins the threads of connections that closed, every second or when woken to stop.
  void joinLoop() {
    while (!stopping_.load()) {
      try {
        joinFinished();
        pollfd fds[1] = {{wake_.get(), POLLIN, 0}};
        if (::poll(fds, 1, 1000) < 0 && errno != EINTR) net::throwErrno("poll");
      } catch (const std::exception& e) {
        log::error(core_.name(), ": ", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  // On the gate's thread: an authenticated connection gets its session thread.
  void startSession(net::Fd fd, const std::string& peer) GYRE_EXCLUDES(sessionsMutex_) {
    net::setNoDelay(fd.get());
    auto connection = std::make_shared<Connection>(std::move(fd), peer, core_, options_.timeout);
    MutexLock lock(sessionsMutex_);
    if (sessions_.size() >= kMaxConnections) {
      refuse(*connection, "too many connections (" + std::to_string(kMaxConnections) + ")");
      return;
    }
    Session& s = sessions_.emplace_back();
    s.connection = connection;
    try {
      s.thread = std::thread([this, &s] {
        try {
          serve(s.connection);
        } catch (const std::exception& e) {
          log::error(core_.name(), ": connection from ", s.connection->name(), ": ", e.what());
        } catch (...) {
          log::error(core_.name(), ": connection from ", s.connection->name(), " failed");
        }
        s.connection->kill();
        s.finished.store(true);
      });
    } catch (const std::system_error& e) {
      sessions_.pop_back();
      refuse(*connection, std::string("cannot start its thread: ") + e.what());
    }
  }

  void joinFinished() GYRE_EXCLUDES(sessionsMutex_) {
    std::list<Session> finished;
    {
      MutexLock lock(sessionsMutex_);
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        auto next = std::next(it);
        if (it->finished.load()) finished.splice(finished.end(), sessions_, it);
        it = next;
      }
    }
    for (Session& s : finished) s.thread.join();
  }

  void reapLoop() GYRE_EXCLUDES(reapMutex_) {
    const auto tick = std::clamp<std::chrono::milliseconds>(
        options_.timeout / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(100));
    UniqueLock lock(reapMutex_);
    while (!stopping_.load()) {
      reapCv_.waitFor(reapMutex_, tick);
      if (stopping_.load()) break;
      lock.unlock();
      try {
        core_.expire(Clock::now());
      } catch (const std::exception& e) {
        log::error(core_.name(), ": timing out requests: ", e.what());
      }
      lock.lock();
    }
  }

  // Runs on the connection's own thread until it closes.
  void serve(const std::shared_ptr<Connection>& c) {
    bool hello = false;
    try {
      while (!stopping_.load() && !c->dead()) serveOne(c, hello);
    } catch (const net::ConnectionClosed&) {
      log::debug(core_.name(), ": ", c->name(), " disconnected");
    } catch (const ProtocolError& e) {
      if (!stopping_.load() && !c->dead()) refuse(*c, e.what());
    } catch (const TimeoutError& e) {
      if (!stopping_.load() && !c->dead())
        refuse(*c, std::string("stalled in the middle of a message: ") + e.what());
    } catch (const std::exception& e) {
      if (!stopping_.load() && !c->dead())
        log::warn(core_.name(), ": connection from ", c->name(), ": ", e.what());
    }
  }

  // What a request's payload must be. Throws ProtocolError for a structural violation.
  struct PayloadRule {
    bool known = true;    // false: cannot be checked yet; skipped (the core answers an error)
    bool atMost = false;  // bytes is a limit, not the exact size
    std::uint64_t bytes = 0;
  };

  PayloadRule payloadRule(const Header& h) const {
    PayloadRule rule;
    switch (h.type) {
      case Type::kHello:
      case Type::kPull:
      case Type::kClock:
      case Type::kStats:
        return rule;
      case Type::kDeclare:
        rule.atMost = true;
        rule.bytes = kMaxDeclarationBytes;
        return rule;
      case Type::kInit:
      case Type::kPush:
      case Type::kReplicateInit:
      case Type::kReplicate:
        break;
    }
    const auto length = core_.sliceLength(h.slice);
    if (!length) {
      rule.known = false;
      return rule;
    }
    rule.bytes = *length * sizeof(float);
    if (h.type == Type::kReplicate) {
      const std::uint32_t workers = core_.numWorkers();
      if (h.worker < 1 || h.worker > workers)
        GYRE_THROW(ProtocolError, "a replicated update with ", h.worker, " contributors (the job has ",
                   workers, " workers): ", h.debugString());
      rule.bytes += std::uint64_t{h.worker} * kContributorBytes;
    }
    return rule;
  }

  void serveOne(const std::shared_ptr<Connection>& c, bool& hello) {
    std::uint8_t head[kHeaderBytes];
    net::readAll(c->fd(), head, kHeaderBytes, Deadline::never());
    Request request;
    request.header = decodeHeader(head);
    const Header& h = request.header;
    if (h.response) GYRE_THROW(ProtocolError, "sent a response as a request: ", h.debugString());
    if (!hello && h.type != Type::kHello)
      GYRE_THROW(ProtocolError, "its first message is not a hello: ", h.debugString());
    if ((h.type == Type::kReplicate || h.type == Type::kReplicateInit) &&
        (!hello || c->worker() != kServerPeer))
      GYRE_THROW(ProtocolError, "a worker sent a message only servers send: ", h.debugString());
    const PayloadRule rule = payloadRule(h);
    if (rule.known && (rule.atMost ? h.payloadBytes > rule.bytes : h.payloadBytes != rule.bytes))
      GYRE_THROW(ProtocolError, "a ", toString(h.type), " with ", h.payloadBytes, " bytes of payload (",
                 rule.atMost ? "at most " : "", rule.bytes, " expected): ", h.debugString());
    const Deadline deadline = Deadline::after(options_.timeout);
    if (!rule.known) {
      if (h.payloadBytes > kMaxSkippedBytes)
        GYRE_THROW(
            ProtocolError, "a ", toString(h.type), " with ", h.payloadBytes,
            " bytes of payload that cannot be checked (the table is not declared, or the slice is unknown)");
      std::uint8_t sink[16 << 10];
      for (std::uint64_t left = h.payloadBytes; left > 0;) {
        const std::size_t n = std::min<std::uint64_t>(left, sizeof(sink));
        net::readAll(c->fd(), sink, n, deadline);
        left -= n;
      }
    } else if (h.payloadBytes > 0) {
      if (h.type == Type::kDeclare) {
        request.bytes.resize(h.payloadBytes);
        net::readAll(c->fd(), request.bytes.data(), request.bytes.size(), deadline);
      } else {
        request.floats.resize(h.payloadBytes / sizeof(float));
        net::readAll(c->fd(), request.floats.data(), h.payloadBytes, deadline);
      }
    }
    core_.countIn(kHeaderBytes + h.payloadBytes);
    if (h.type == Type::kHello && !hello) {
      hello = true;
      c->setWorker(h.worker);
      log::debug(
          core_.name(), ": ", c->name(), " is ",
          h.worker == kServerPeer ? std::string("a primary server") : "worker " + std::to_string(h.worker));
      Header ok = h;
      c->respond(ok, {});
      return;
    }
    request.from = c;
    core_.handle(std::move(request));
  }

  const ServerOptions options_;
  ServerCore core_;  // outlives every thread below (declared first, destroyed last)
  net::Fd listen_;
  const std::string address_;
  net::Fd wake_;
  std::atomic<bool> stopping_{false};

  Mutex sessionsMutex_;
  std::list<Session> sessions_ GYRE_GUARDED_BY(sessionsMutex_);

  // The reaper sleeps on reapCv_; the destructor sets stopping_ under reapMutex_ to wake it
  // without a lost wake-up (reapMutex_ guards no member).
  Mutex reapMutex_;
  CondVar reapCv_;

  std::thread joiner_;
  std::thread reaper_;
  std::unique_ptr<auth::AuthGate> gate_;  // last: hands connections to everything above
};

}  // namespace

std::unique_ptr<Server> Server::start(const ServerOptions& options) {
  return std::make_unique<ServerImpl>(options);
}

}  // namespace gyre::ps
