#include "rt/links.h"

#include <sys/socket.h>

#include <algorithm>

#include "common/auth.h"
#include "common/logging.h"
#include "gyre/errors.h"

namespace gyre::rt::detail {
namespace {

// How long the rest of a message may take once its header arrived, and a write.
constexpr std::chrono::seconds kMessageTimeout{120};

// Bursts of sends (PeerLink): a send within kBurstGap of its thread's last one, with no wait in
// between, is queued; a queue goes out at kFlushAt sends, and a send of kLargeBytes or more takes
// the queue out with it at once (a large payload gains nothing from waiting).
using SteadyClock = std::chrono::steady_clock;
constexpr auto kBurstGap = std::chrono::microseconds(20);
constexpr std::size_t kFlushAt = 64;
constexpr std::size_t kLargeBytes = 64 << 10;
// How long the flusher leaves a queue to its thread (which flushes it at its next wait).
constexpr auto kFlushDelay = std::chrono::microseconds(200);

struct ThreadSends {
  SteadyClock::time_point last{};               // this thread's last send; the epoch once it waited since
  std::vector<std::weak_ptr<PeerLink>> queued;  // links it queued on
};
thread_local ThreadSends tSends;

// Writes the queues that their threads left (a burst with no wait after it) within kFlushDelay.
// One per process, started with the first queue; it sleeps while no queue waits.
class Flusher {
 public:
  static Flusher& instance() {
    static Flusher* flusher = new Flusher;  // never destroyed: its thread may run at exit
    return *flusher;
  }
  void add(std::weak_ptr<PeerLink> link) GYRE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      links_.push_back(std::move(link));
      if (links_.size() > 1 || !sleeping_) return;
    }
    cv_.notifyOne();
  }

 private:
  Flusher() {
    std::thread([this] { run(); }).detach();
  }
  void run() GYRE_EXCLUDES(mu_) {
    UniqueLock lock(mu_);
    for (;;) {
      sleeping_ = true;
      cv_.wait(mu_, [this]() GYRE_REQUIRES(mu_) { return !links_.empty(); });
      sleeping_ = false;
      lock.unlock();
      std::this_thread::sleep_for(kFlushDelay);
      lock.lock();
      std::vector<std::weak_ptr<PeerLink>> links, busy;
      links.swap(links_);
      lock.unlock();
      // A link another thread is writing to (a slow peer, a large payload) is tried again at the
      // next round rather than waited for, so that it holds up no other link's queue.
      for (auto& w : links)
        if (const std::shared_ptr<PeerLink> l = w.lock(); l && !l->tryFlush()) busy.push_back(w);
      links.clear();
      lock.lock();
      for (auto& w : busy) links_.push_back(std::move(w));
    }
  }
  Mutex mu_;
  CondVar cv_;
  std::vector<std::weak_ptr<PeerLink>> links_ GYRE_GUARDED_BY(mu_);
  bool sleeping_ GYRE_GUARDED_BY(mu_) = false;
};

}  // namespace

void flushThisThread() {
  tSends.last = {};
  if (tSends.queued.empty()) return;
  auto queued = std::move(tSends.queued);
  tSends.queued.clear();
  for (auto& weak : queued)
    if (const std::shared_ptr<PeerLink> l = weak.lock()) l->flush();
}

struct Server::Session {
  net::Fd fd;
  std::string peer;
  // Answers ready to go: the worker that finds no write under way writes them, and those that
  // come meanwhile, in one gathered write each round (several workers' answers per system call).
  Mutex writeMu;
  std::vector<wire::Message> outgoing GYRE_GUARDED_BY(writeMu);
  bool writing GYRE_GUARDED_BY(writeMu) = false;
};

Server::Server(LocalNode& node, const std::string& secret, const std::string& host, std::string name)
    : node_(node), name_(std::move(name)), listen_(net::listenOn(host, 0)) {
  address_ = net::joinHostPort(host, net::localPort(listen_.get()));
  gate_ = std::make_unique<auth::AuthGate>(
      listen_.get(),
      auth::GateOptions{.secret = secret, .context = std::string(wire::kAuthContext), .name = name_},
      [this](net::Fd fd, const std::string& peer) { start(std::move(fd), peer); });
}

Server::~Server() {
  gate_.reset();  // no new connections
  std::list<std::pair<std::shared_ptr<Session>, std::thread>> sessions;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    sessions.splice(sessions.end(), sessions_);
  }
  for (auto& [session, thread] : sessions) ::shutdown(session->fd.get(), SHUT_RDWR);
  for (auto& [session, thread] : sessions) thread.join();
}

void Server::start(net::Fd fd, const std::string& peer) {
  net::setNoDelay(fd.get());
  auto session = std::make_shared<Session>();
  session->fd = std::move(fd);
  session->peer = peer;
  MutexLock lock(mu_);
  if (stopping_) return;
  sessions_.emplace_back(session, std::thread([this, session] { serve(session); }));
}

void Server::serve(const std::shared_ptr<Session>& session) {
  try {
    wire::Reader reader(session->fd.get(), session->peer);
    for (;;) handle(session, reader.next(kMessageTimeout));
  } catch (const net::ConnectionClosed&) {
    // The caller went away (or this server stops): its answers still to come are dropped.
  } catch (const std::exception& e) {
    log::warn(name_, ": closing the connection from ", session->peer, ": ", e.what());
  }
  ::shutdown(session->fd.get(), SHUT_RDWR);
}

void Server::handle(const std::shared_ptr<Session>& session, wire::Message request) {
  const std::uint8_t type = request.type;
  if (type & wire::kResponseBit)
    throw ProtocolError("gyre::rt: a response where a request belongs: " + request.debugString());
  auto answer = [session, type, id = request.id](Bytes value, std::exception_ptr error) {
    wire::Message response;
    response.type = static_cast<std::uint8_t>(type | wire::kResponseBit);
    response.id = id;
    response.status = error ? wire::Status::kError : wire::Status::kOk;
    response.payload = error ? wire::encodeError(error) : std::move(value);
    std::vector<wire::Message> batch;
    {
      MutexLock lock(session->writeMu);
      session->outgoing.push_back(std::move(response));
      if (session->writing) return;  // the writer takes it with its next round
      session->writing = true;
    }
    for (;;) {
      {
        MutexLock lock(session->writeMu);
        batch.clear();
        batch.swap(session->outgoing);
        if (batch.empty()) {
          session->writing = false;
          return;
        }
      }
      try {
        wire::writeMessages(session->fd.get(), batch, Deadline::after(kMessageTimeout), session->peer);
      } catch (const std::exception&) {
        ::shutdown(session->fd.get(), SHUT_RDWR);  // the caller is gone or stuck: its reader sees it
      }
    }
  };
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kTask:
      node_.runTask(request.name, std::move(request.payload), std::move(answer));
      return;
    case wire::Type::kCreateActor: {
      // "Counter\0Counter#0.1\0R\0C": the class, the actor's name, the times it was built before,
      // and how many of its calls may run at once.
      const std::size_t a = request.name.find('\0');
      const std::size_t b = a == std::string::npos ? a : request.name.find('\0', a + 1);
      const std::size_t c = b == std::string::npos ? b : request.name.find('\0', b + 1);
      auto count = [&](std::size_t from, std::size_t to) {  // a decimal count, else -1
        const std::string digits = request.name.substr(from, to - from);
        return !digits.empty() && digits.size() < 10 &&
                       digits.find_first_not_of("0123456789") == std::string::npos
                   ? std::stoi(digits)
                   : -1;
      };
      const int restarts = c == std::string::npos ? -1 : count(b + 1, c);
      const int concurrency = c == std::string::npos ? -1 : count(c + 1, request.name.size());
      if (restarts < 0 || concurrency < 1)
        throw ProtocolError("gyre::rt: an actor's creation without its name: " + request.debugString());
      node_.createActor(request.actor, request.name.substr(a + 1, b - a - 1), request.name.substr(0, a),
                        std::move(request.payload), restarts, concurrency);
      answer(pack(msgpack::type::nil_t()), nullptr);
      return;
    }
    case wire::Type::kCall:
      node_.callActor(request.actor, request.name, std::move(request.payload), std::move(answer));
      return;
    case wire::Type::kKillActor:
      node_.killActor(request.actor);
      answer(pack(msgpack::type::nil_t()), nullptr);
      return;
    case wire::Type::kGetObject: {
      std::shared_ptr<const Bytes> value;
      try {
        value = node_.object(request.actor);
      } catch (...) {
        return answer({}, std::current_exception());
      }
      answer(*value, nullptr);
      return;
    }
  }
}

PeerLink::PeerLink(int rank, const std::string& address, const std::string& secret, Deadline deadline)
    : rank_(rank), name_("process " + std::to_string(rank) + " (" + address + ")") {
  const auto [host, port] = net::splitHostPort(address);
  try {
    fd_ = auth::connectAuthenticated(host, port, secret, wire::kAuthContext, deadline);
  } catch (const net::ConnectionClosed& e) {
    throw PeerLostError("gyre::rt: cannot reach " + name_ + ": " + e.what(), rank);
  }
  net::setNoDelay(fd_.get());
  reader_ = std::thread([this] { readLoop(); });
}

PeerLink::~PeerLink() {
  close();
}

void PeerLink::close() {
  std::call_once(closed_, [this] {
    flush();
    ::shutdown(fd_.get(), SHUT_RDWR);
    reader_.join();
  });
}

void PeerLink::flush() {
  MutexLock lock(writeMu_);
  writeQueuedLocked();
}

bool PeerLink::tryFlush() {
  if (!writeMu_.try_lock()) return false;
  writeQueuedLocked();  // throws nothing: it catches what the write throws
  writeMu_.unlock();
  return true;
}

void PeerLink::writeQueuedLocked() {
  if (queued_.empty()) return;
  try {
    wire::writeMessages(fd_.get(), queued_, Deadline::after(kMessageTimeout), name_);
  } catch (const std::exception&) {
    ::shutdown(fd_.get(), SHUT_RDWR);  // the reader fails what is pending, these calls included
  }
  queued_.clear();
}

void PeerLink::send(wire::Message request, Done done) {
  std::exception_ptr lost;
  {
    MutexLock lock(mu_);
    if (dead_.load()) {
      lost = std::make_exception_ptr(PeerLostError("gyre::rt: " + name_ + " was lost: " + lostWhy_, rank_));
    } else {
      request.id = nextId_++;
      pending_.emplace(request.id, std::move(done));
    }
  }
  if (lost) return done({}, lost);
  const SteadyClock::time_point now = SteadyClock::now();
  const bool burst = now - tSends.last < kBurstGap;
  tSends.last = now;
  const bool large = request.payload.size() >= kLargeBytes;
  bool remember = false, wakeFlusher = false;
  {
    MutexLock lock(writeMu_);
    queued_.push_back(std::move(request));
    if (!burst || large || queued_.size() >= kFlushAt) {
      writeQueuedLocked();
    } else {
      remember = true;
      wakeFlusher = queued_.size() == 1;
    }
  }
  if (!remember) return;
  const std::weak_ptr<PeerLink> self = weak_from_this();
  auto same = [&self](const std::weak_ptr<PeerLink>& q) {
    return !q.owner_before(self) && !self.owner_before(q);
  };
  if (std::none_of(tSends.queued.begin(), tSends.queued.end(), same)) tSends.queued.push_back(self);
  if (wakeFlusher) Flusher::instance().add(self);
}

void PeerLink::readLoop() {
  try {
    wire::Reader reader(fd_.get(), name_);
    for (;;) {
      wire::Message m = reader.next(kMessageTimeout);
      if (!(m.type & wire::kResponseBit))
        throw ProtocolError("gyre::rt: a request where an answer belongs: " + m.debugString());
      Done done;
      {
        MutexLock lock(mu_);
        const auto it = pending_.find(m.id);
        if (it == pending_.end())
          throw ProtocolError("gyre::rt: an answer to no call in flight: " + m.debugString());
        done = std::move(it->second);
        pending_.erase(it);
      }
      if (m.status == wire::Status::kOk) {
        done(std::move(m.payload), nullptr);
      } else {
        std::exception_ptr error;
        try {
          error = wire::decodeError(m.payload);
        } catch (...) {
          error = std::current_exception();
        }
        done({}, error);
      }
    }
  } catch (const std::exception& e) {
    ::shutdown(fd_.get(), SHUT_RDWR);  // a malformed or late answer: the peer's session ends too
    fail(e.what());
  }
}

void PeerLink::fail(const std::string& why) {
  std::map<std::uint64_t, Done> pending;
  {
    MutexLock lock(mu_);
    dead_.store(true);
    lostWhy_ = why;
    pending.swap(pending_);
  }
  for (auto& [id, done] : pending)
    done({}, std::make_exception_ptr(PeerLostError("gyre::rt: " + name_ + " was lost: " + why, rank_)));
}

}  // namespace gyre::rt::detail
