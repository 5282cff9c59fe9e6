#include "common/auth_gate.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <map>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace gyre::auth {
namespace {

// Refusals logged one by one per interval; the rest of the interval's are logged as a count.
constexpr int kLoggedPerInterval = 10;
constexpr auto kLogInterval = std::chrono::seconds(10);

struct Pending {
  net::Fd fd;
  std::string peer;    // host:port
  std::string source;  // host
  Deadline deadline;
  ServerHandshake handshake;
  ServerHandshake::Want want = ServerHandshake::Want::kRead;
};

// A flood holds descriptors: take the hard limit on open files (as servers commonly do), once.
void raiseFileLimit() {
  static const bool raised = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
    limit.rlim_cur = limit.rlim_max;
    return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
  }();
  (void)raised;
}

// "host" of "host:port" or "[v6]:port".
std::string sourceOf(const std::string& peer) {
  try {
    return net::splitHostPort(peer).first;
  } catch (const Error&) {
    return peer;
  }
}

}  // namespace

class AuthGate::Impl {
 public:
  Impl(int listenFd, GateOptions options, OnAuthenticated onAuthenticated)
      : listenFd_(listenFd), o_(std::move(options)), onAuthenticated_(std::move(onAuthenticated)) {
    net::setNonBlocking(listenFd_, true);
    raiseFileLimit();
    wake_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) net::throwErrno("eventfd");
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    stopping_ = true;
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
    (void)ignored;
    thread_.join();
    flushLog();
  }

  GateStats stats() const {
    MutexLock lock(statsMutex_);
    return stats_;
  }

 private:
  using Iterator = std::list<Pending>::iterator;

  void loop() {
    while (!stopping_) {
      try {
        step();
      } catch (const std::exception& e) {
        // Only the gate's own resources fail here (poll, accept: out of descriptors); keep going.
        log::error(o_.name, ": ", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  void step() {
    std::vector<pollfd> fds{{wake_.get(), POLLIN, 0}, {listenFd_, POLLIN, 0}};
    std::vector<Iterator> order;
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      const short events = it->want == ServerHandshake::Want::kWrite ? POLLOUT : POLLIN;
      fds.push_back({it->fd.get(), events, 0});
      order.push_back(it);
      next = std::min(next, it->deadline.at());
    }
    if (::poll(fds.data(), fds.size(), Deadline(next).remainingMs(1000) + 1) < 0) {
      if (errno == EINTR) return;
      net::throwErrno("poll");
    }
    if (fds[0].revents & POLLIN) return;  // stopping
    for (std::size_t i = 0; i < order.size(); ++i)
      if (fds[i + 2].revents != 0) advance(order[i]);
    expire();
    if (fds[1].revents & POLLIN) acceptAll();
    maybeFlushLog();
  }

  void acceptAll() {
    for (int n = 0; n < 256; ++n) {  // then serve the pending ones again
      net::Fd fd(::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd.valid()) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && !pending_.empty()) {
          evictOldest(nullptr, "evicted: this process ran out of file descriptors");
          continue;
        }
        net::throwErrno("accept");
      }
      std::string peer = "unknown peer";
      try {
        peer = net::peerAddress(fd.get());
      } catch (const Error&) {
      }
      {
        MutexLock lock(statsMutex_);
        ++stats_.accepted;
      }
      const std::string source = sourceOf(peer);
      if (perSource_[source] >= o_.maxPendingPerSource) {
        evictOldest(&source, "evicted: " + std::to_string(o_.maxPendingPerSource) +
                                 " handshakes from one address were pending");
      } else if (pending_.size() >= o_.maxPending) {
        evictOldest(nullptr, "evicted: " + std::to_string(o_.maxPending) + " handshakes were pending");
      }
      pending_.push_back(Pending{std::move(fd), peer, source, Deadline::after(o_.handshakeTimeout),
                                 ServerHandshake(o_.secret, o_.context)});
      ++perSource_[source];
      advance(std::prev(pending_.end()));  // the hello may be here already
    }
  }

  void advance(Iterator it) {
    try {
      it->want = it->handshake.advance(it->fd.get());
    } catch (const std::exception& e) {
      refuse(it, std::string("authentication failed: ") + e.what(), false);
      return;
    }
    if (it->want != ServerHandshake::Want::kDone) return;
    net::Fd fd = std::move(it->fd);
    const std::string peer = it->peer;
    forget(it);
    {
      MutexLock lock(statsMutex_);
      ++stats_.authenticated;
    }
    try {
      net::setNonBlocking(fd.get(), false);
      onAuthenticated_(std::move(fd), peer);
    } catch (const std::exception& e) {
      log::error(o_.name, ": could not take the authenticated connection from ", peer, ": ", e.what());
    }
  }

  void expire() {
    const auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->deadline.at() <= now)
        refuse(it, "did not complete the handshake within " + std::to_string(o_.handshakeTimeout.count()) + " ms",
               false);
      it = next;
    }
  }

  // The oldest pending handshake overall, or of `source`, makes room.
  void evictOldest(const std::string* source, const std::string& why) {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (source != nullptr && it->source != *source) continue;
      refuse(it, why, true);
      return;
    }
  }

  void refuse(Iterator it, const std::string& why, bool evicted) {
    {
      MutexLock lock(statsMutex_);
      ++stats_.refused;
      if (evicted) ++stats_.evicted;
    }
    if (loggedThisInterval_ < kLoggedPerInterval) {
      ++loggedThisInterval_;
      log::warn(o_.name, ": refused connection from ", it->peer, ": ", why);
    } else {
      ++unloggedThisInterval_;
    }
    forget(it);
  }

  void forget(Iterator it) {
    auto count = perSource_.find(it->source);
    if (count != perSource_.end() && --count->second == 0) perSource_.erase(count);
    pending_.erase(it);
  }

  void maybeFlushLog() {
    if (Clock::now() - intervalStart_ < kLogInterval) return;
    flushLog();
  }

  void flushLog() {
    if (unloggedThisInterval_ > 0)
      log::warn(o_.name, ": refused ", unloggedThisInterval_, " more connection(s) in the last ",
                std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - intervalStart_).count(),
                " s (not authenticated; see the counts above)");
    unloggedThisInterval_ = 0;
    loggedThisInterval_ = 0;
    intervalStart_ = Clock::now();
  }

  const int listenFd_;
  const GateOptions o_;
  const OnAuthenticated onAuthenticated_;
  net::Fd wake_;
  std::atomic<bool> stopping_{false};

  mutable Mutex statsMutex_;
  GateStats stats_ GYRE_GUARDED_BY(statsMutex_);

  // The gate thread's own.
  std::list<Pending> pending_;  // oldest first
  std::map<std::string, std::size_t> perSource_;
  int loggedThisInterval_ = 0;
  std::uint64_t unloggedThisInterval_ = 0;
  Clock::time_point intervalStart_ = Clock::now();

  std::thread thread_;  // last: starts after everything above exists
};

AuthGate::AuthGate(int listenFd, GateOptions options, OnAuthenticated onAuthenticated)
    : impl_(std::make_unique<Impl>(listenFd, std::move(options), std::move(onAuthenticated))) {}

AuthGate::~AuthGate() = default;

GateStats AuthGate::stats() const {
  return impl_->stats();
}

}  // namespace gyre::auth
