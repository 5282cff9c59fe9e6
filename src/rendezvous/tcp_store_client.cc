// The TCP store client. Each call borrows an authenticated connection from a small pool (and
// opens one when all are busy), so a thread blocked in get/wait never holds up the others.
// A connection whose exchange broke (time-out mid-message, malformed reply) is discarded; once
// the server closes a connection it is taken to be gone, and every later call throws at once.
#include <tuple>
#include <vector>

#include "common/auth.h"
#include "common/check.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "rendezvous/network_store.h"
#include "rendezvous/tcp_store_protocol.h"

namespace gyre {
namespace {

using rendezvous::Command;
using rendezvous::Request;
using rendezvous::Response;
using rendezvous::Status;

// Extra time a client waits, past a get/wait's own time-out, for the server's answer.
constexpr std::chrono::seconds kReplyGrace{5};
// Connections kept open for reuse; more are opened while more threads call at once.
constexpr std::size_t kMaxIdleConnections = 8;

class TcpStoreClient final : public Store, public rendezvous::NetworkStore {
 public:
  TcpStoreClient(const std::string& address, const std::string& secret, std::chrono::milliseconds timeout)
      : address_(address), secret_(secret) {
    setTimeout(timeout);
    std::tie(host_, port_) = net::splitHostPort(address);
    idle_.push_back(open(rendezvous::deadlineAfter(timeout)));
    localAddress_ = net::localHost(idle_.back().get());
  }

  std::string localAddress() const override { return localAddress_; }

  void set(const std::string& key, const Bytes& value) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(value);
    call(Request{Command::kSet, {key}, value, {}, 0}, replyDeadline(timeout()));
  }

  Bytes get(const std::string& key, Duration timeout) override {
    rendezvous::checkKey(key);
    const Duration t = resolve(timeout);
    return call(Request{Command::kGet, {key}, {}, {}, t.count()}, replyDeadline(t)).value;
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    rendezvous::checkKey(key);
    return call(Request{Command::kAdd, {key}, {}, {}, delta}, replyDeadline(timeout())).number;
  }

  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    rendezvous::checkKey(key);
    rendezvous::checkValue(expected);
    rendezvous::checkValue(desired);
    return call(Request{Command::kCompareSet, {key}, desired, expected, 0}, replyDeadline(timeout())).value;
  }

  bool deleteKey(const std::string& key) override {
    rendezvous::checkKey(key);
    return call(Request{Command::kDelete, {key}, {}, {}, 0}, replyDeadline(timeout())).flag;
  }

  bool check(const std::vector<std::string>& keys) override {
    rendezvous::checkKeys(keys);
    return call(Request{Command::kCheck, keys, {}, {}, 0}, replyDeadline(timeout())).flag;
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rendezvous::checkKeys(keys);
    const Duration t = resolve(timeout);
    call(Request{Command::kWait, keys, {}, {}, t.count()}, replyDeadline(t));
  }

 private:
  static Deadline replyDeadline(Duration t) {
    return t >= std::chrono::hours(24 * 365) ? Deadline::never() : rendezvous::deadlineAfter(t + kReplyGrace);
  }

  net::Fd open(Deadline deadline) {
    try {
      return auth::connectAuthenticated(host_, port_, secret_, rendezvous::kStoreAuthContext, deadline);
    } catch (const net::ConnectionClosed& e) {
      GYRE_THROW(Error, "tcp store at ", address_,
                 " closed the connection during authentication until the time-out: ", e.what());
    } catch (const ProtocolError& e) {
      GYRE_THROW(ProtocolError, "cannot authenticate with the tcp store at ", address_, ": ", e.what());
    }
  }

  net::Fd acquire(Deadline deadline) {
    {
      MutexLock lock(mutex_);
      if (!gone_.empty()) GYRE_THROW(Error, "tcp store at ", address_, " is unusable: ", gone_);
      if (!idle_.empty()) {
        net::Fd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    return open(deadline);
  }

  void release(net::Fd fd) {
    MutexLock lock(mutex_);
    if (gone_.empty() && idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(fd));
  }

  Response call(const Request& request, Deadline deadline) {
    const auto frame = rendezvous::encodeFrame(request);
    net::Fd fd = acquire(deadline);
    Response response;
    try {
      net::writeAll(fd.get(), frame.data(), frame.size(), deadline);
      std::uint8_t header[rendezvous::kFrameHeaderBytes];
      net::readAll(fd.get(), header, sizeof(header), deadline);
      std::vector<std::uint8_t> body(rendezvous::parseFrameHeader(header));
      net::readAll(fd.get(), body.data(), body.size(), deadline);
      response = rendezvous::decodeResponse(body);
    } catch (const net::ConnectionClosed& e) {
      {
        MutexLock lock(mutex_);
        gone_ = "the server closed the connection";
        idle_.clear();
      }
      GYRE_THROW(Error, "tcp store at ", address_, " closed the connection during ",
                 rendezvous::toString(request.command), " (is the server gone?): ", e.what());
    } catch (const TimeoutError& e) {
      GYRE_THROW(TimeoutError, "tcp store at ", address_, " did not answer ", request.debugString(), ": ",
                 e.what());
    }  // a ProtocolError propagates as is; either way the connection is dropped, not reused
    release(std::move(fd));
    if (response.status == Status::kTimeout) throw TimeoutError(response.message);
    if (response.status == Status::kInvalidArgument) throw InvalidArgument(response.message);
    return response;
  }

  const std::string address_;
  const std::string secret_;
  std::string host_;
  std::uint16_t port_ = 0;
  std::string localAddress_;  // this host's address on the route to the server
  Mutex mutex_;
  std::vector<net::Fd> idle_ GYRE_GUARDED_BY(mutex_);
  std::string gone_ GYRE_GUARDED_BY(mutex_);  // why the client is unusable, once it is
};

}  // namespace

std::shared_ptr<Store> connectTcpStore(const std::string& address, const std::string& secret,
                                       std::chrono::milliseconds timeout) {
  return std::make_shared<TcpStoreClient>(address, secret, timeout);
}

}  // namespace gyre
