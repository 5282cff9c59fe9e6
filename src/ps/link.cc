#include "ps/link.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <map>
#include <thread>

#include "common/auth.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/socket.h"

namespace gyre::ps {
namespace {

constexpr std::size_t kMaxIov = 16;
// Bounds a write of one request; a server that reads nothing for this long is stuck.
constexpr std::chrono::seconds kWriteTimeout{120};

class LinkImpl final : public Link {
 public:
  LinkImpl(net::Fd fd, std::string peerName) : fd_(std::move(fd)), peerName_(std::move(peerName)) {
    reader_ = std::thread([this] { readLoop(); });
  }

  ~LinkImpl() override { close(); }

  void send(Header request, std::span<const iovec> payload, void* into, std::size_t intoBytes,
            Callback done) override GYRE_EXCLUDES(writeMu_, mu_) {
    GYRE_ARG_CHECK(payload.size() < kMaxIov, "a request of ", payload.size(), " payload parts");
    std::uint64_t bytes = 0;
    for (const iovec& part : payload) bytes += part.iov_len;
    UniqueLock write(writeMu_);
    std::uint32_t id;
    {
      UniqueLock lock(mu_);
      if (broken_) {
        lock.unlock();
        write.unlock();
        done(lostOutcome(request));
        return;
      }
      id = nextId_++;
      pending_.emplace(id, Pending{request.type, into, intoBytes, std::move(done)});
    }
    request.id = id;
    request.response = false;
    request.status = Status::kOk;
    request.payloadBytes = bytes;
    std::uint8_t header[kHeaderBytes];
    encodeHeader(request, header);
    iovec parts[kMaxIov];
    parts[0] = {header, kHeaderBytes};
    std::size_t n = 1;
    for (const iovec& part : payload)
      if (part.iov_len > 0) parts[n++] = part;
    try {
      net::writeAllV(fd_.get(), std::span<iovec>(parts, n), Deadline::after(kWriteTimeout), peerName_);
    } catch (const Error& e) {
      write.unlock();
      breakLink(e.what());
    }
  }

  void close() override GYRE_EXCLUDES(closeMu_, mu_) {
    breakLink("the link was closed");
    MutexLock lock(closeMu_);
    if (reader_.joinable()) reader_.join();
    failPending();
  }

  bool broken() const override GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return broken_;
  }
  const std::string& peerName() const override { return peerName_; }

 private:
  struct Pending {
    Type type;
    void* into;
    std::size_t intoBytes;
    Callback done;
  };

  Outcome lostOutcome(const Header& request) const GYRE_EXCLUDES(mu_) {
    Outcome out;
    out.header = request;
    std::string why;
    {
      MutexLock lock(mu_);
      why = reason_;
    }
    out.error = std::make_exception_ptr(PeerLostError("lost the connection to " + peerName_ + ": " + why, -1));
    return out;
  }

  // Marks the link broken and wakes the reader; the reader fails what is pending.
  void breakLink(const std::string& why) GYRE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (broken_) return;
      broken_ = true;
      reason_ = why;
    }
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

  // Runs the callbacks of every request in flight with PeerLostError, in request order.
  void failPending() GYRE_EXCLUDES(failMu_, mu_) {
    MutexLock failing(failMu_);
    std::map<std::uint32_t, Pending> pending;
    {
      MutexLock lock(mu_);
      pending.swap(pending_);
    }
    for (auto& [id, p] : pending) {
      Header h;
      h.type = p.type;
      h.id = id;
      p.done(lostOutcome(h));
    }
  }

  void readLoop() {
    try {
      for (;;) readOne();
    } catch (const std::exception& e) {
      breakLink(e.what());
    }
    failPending();
  }

  void readOne() GYRE_EXCLUDES(mu_) {
    std::uint8_t raw[kHeaderBytes];
    net::readAll(fd_.get(), raw, kHeaderBytes, Deadline::never());
    const Header h = decodeHeader(raw);
    if (!h.response) GYRE_THROW(ProtocolError, peerName_, " sent a request (", h.debugString(), ") instead of a response");
    Pending p;
    {
      MutexLock lock(mu_);
      auto it = pending_.find(h.id);
      if (it == pending_.end() || it->second.type != h.type)
        GYRE_THROW(ProtocolError, peerName_, " answered a request it was not asked (", h.debugString(), ")");
      p = std::move(it->second);
      pending_.erase(it);
    }
    Outcome out;
    out.header = h;
    if (h.status != Status::kOk) {
      std::string text = readText(h);
      if (h.status == Status::kTimeout)
        out.error = std::make_exception_ptr(TimeoutError(text));
      else
        out.error = std::make_exception_ptr(Error(text));
    } else if (p.into != nullptr) {
      if (h.payloadBytes != p.intoBytes)
        GYRE_THROW(ProtocolError, peerName_, " answered ", h.payloadBytes, " bytes where ", p.intoBytes, " were expected (",
                   h.debugString(), ")");
      net::readAll(fd_.get(), p.into, p.intoBytes, Deadline::after(kWriteTimeout));
    } else {
      if (h.payloadBytes > kMaxMessageTextBytes)
        GYRE_THROW(ProtocolError, peerName_, " answered with ", h.payloadBytes, " bytes of payload (at most ",
                   kMaxMessageTextBytes, ")");
      out.payload.resize(h.payloadBytes);
      if (!out.payload.empty()) net::readAll(fd_.get(), out.payload.data(), out.payload.size(), Deadline::after(kWriteTimeout));
    }
    p.done(std::move(out));
  }

  std::string readText(const Header& h) {
    if (h.payloadBytes > kMaxMessageTextBytes)
      GYRE_THROW(ProtocolError, peerName_, " sent an error message of ", h.payloadBytes, " bytes");
    std::string text(h.payloadBytes, '\0');
    if (!text.empty()) net::readAll(fd_.get(), text.data(), text.size(), Deadline::after(kWriteTimeout));
    return text;
  }

  net::Fd fd_;
  const std::string peerName_;
  Mutex writeMu_;  // one request on the wire at a time
  mutable Mutex mu_;
  bool broken_ GYRE_GUARDED_BY(mu_) = false;
  std::string reason_ GYRE_GUARDED_BY(mu_);
  std::uint32_t nextId_ GYRE_GUARDED_BY(mu_) = 1;
  std::map<std::uint32_t, Pending> pending_ GYRE_GUARDED_BY(mu_);
  Mutex failMu_;                                  // failPending's callbacks run one batch at a time
  Mutex closeMu_;                                 // close() from several threads
  std::thread reader_ GYRE_GUARDED_BY(closeMu_);  // started by the constructor, joined by close()
};

}  // namespace

std::unique_ptr<Link> Link::connect(const std::string& address, const std::string& secret, const Header& hello,
                                    const std::string& peerName, Deadline deadline) {
  const auto [host, port] = net::splitHostPort(address);
  net::Fd fd;
  try {
    fd = auth::connectAuthenticated(host, port, secret, kPsAuthContext, deadline);
  } catch (const net::ConnectionClosed& e) {
    GYRE_THROW_PEER_LOST(-1, peerName, " closed the connection during the handshake until the time-out: ", e.what());
  }
  net::setNonBlocking(fd.get(), false);
  auto link = std::make_unique<LinkImpl>(std::move(fd), peerName);
  Header h = hello;
  h.type = Type::kHello;
  link->call(h, {}, deadline);
  return link;
}

Link::Outcome Link::call(Header request, std::span<const iovec> payload, Deadline deadline) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> future = promise->get_future();
  send(request, payload, nullptr, 0, [promise](Outcome&& out) { promise->set_value(std::move(out)); });
  if (future.wait_until(deadline.at()) != std::future_status::ready)
    GYRE_THROW(TimeoutError, peerName(), " did not answer a ", toString(request.type), " request in time");
  Outcome out = future.get();
  if (out.error) std::rethrow_exception(out.error);
  return out;
}

}  // namespace gyre::ps
