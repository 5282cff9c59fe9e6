#include "bench_serve_load.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <string_view>

#include "gyre/errors.h"

namespace gyre::app {
namespace {

using Clock = std::chrono::steady_clock;

// One keep-alive connection of the load, with at most one request in flight.
struct Connection {
  int fd = -1;
  bool busy = false;
  Clock::time_point due{};  // what its request's latency counts from
  std::string in;           // the answer so far
};

int connectTo(const LoadSpec& s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(s.host.c_str(), std::to_string(s.port).c_str(), &hints, &found) != 0 || found == nullptr)
    return -1;
  int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return -1;
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // a request goes out at once
  return fd;
}

// Writes all of `bytes` (blocking the load briefly if the socket is full); false if it failed.
bool sendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 10000) <= 0) return false;
    } else {
      return false;
    }
  }
  return true;
}

// A whole answer at the front of `in`: its status, its body (for errors), and its length in
// `in`; 0 while it is not whole.
std::size_t answerIn(const std::string& in, int& status, std::string& body, bool& close) {
  const std::size_t head = in.find("\r\n\r\n");
  if (head == std::string::npos) return 0;
  std::size_t length = 0;
  status = 0;
  close = false;
  std::size_t line = 0;
  for (std::size_t at = 0; at < head; at = line + 2) {
    line = in.find("\r\n", at);
    if (line == std::string::npos || line > head) line = head;
    std::string field = in.substr(at, line - at);
    std::transform(field.begin(), field.end(), field.begin(), [](unsigned char c) { return std::tolower(c); });
    if (at == 0) {
      if (field.size() >= 12) std::from_chars(field.data() + 9, field.data() + 12, status);
    } else if (field.starts_with("content-length:")) {
      const std::size_t v = field.find_first_not_of(' ', 15);
      if (v != std::string::npos) std::from_chars(field.data() + v, field.data() + field.size(), length);
    } else if (field.starts_with("connection:") && field.find("close") != std::string::npos) {
      close = true;
    }
  }
  if (status == 100) {  // an interim answer: the real one follows
    status = 0;
    return head + 4;
  }
  if (in.size() < head + 4 + length) return 0;
  body = in.substr(head + 4, length);
  return head + 4 + length;
}

// The load on one thread: every connection in one epoll set, requests sent when due (open loop)
// or when the last is answered (closed loop). No thread per connection: the load costs the cores
// it shares with the server little more than its system calls.
class Load {
 public:
  explicit Load(const LoadSpec& s) : s_(s), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (epoll_ < 0) throw Error(std::string("gyre bench serve: epoll_create1: ") + std::strerror(errno));
    request_ = "POST " + s.path + " HTTP/1.1\r\nHost: " + s.host + ":" + std::to_string(s.port) +
               "\r\nContent-Type: " + s.contentType + "\r\n";
    if (!s.shapeHeader.empty()) request_ += "X-Gyre-Shape: " + s.shapeHeader + "\r\n";
    request_ += "Content-Length: " + std::to_string(s.body.size()) + "\r\n\r\n" + s.body;
    connections_.resize(static_cast<std::size_t>(std::max(1, s.clients)));
    for (std::size_t i = 0; i < connections_.size(); ++i) open(i);
  }
  ~Load() {
    for (Connection& c : connections_)
      if (c.fd >= 0) ::close(c.fd);
    ::close(epoll_);
  }

  LoadResult run() {
    start_ = Clock::now() + std::chrono::milliseconds(20);
    const Clock::time_point end = start_ + std::chrono::microseconds(static_cast<std::int64_t>(s_.seconds * 1e6));
    const bool open = s_.rate > 0;
    // Open loop: the arrivals of a Poisson process at `rate`, due times from the start.
    std::vector<Clock::duration> due;
    if (open) {
      std::mt19937_64 random(s_.seed);
      std::exponential_distribution<double> gap(s_.rate);
      for (double t = gap(random); t < s_.seconds; t += gap(random))
        due.push_back(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
    }
    // Whatever is still unanswered a minute after the end is counted as failed.
    const Clock::time_point giveUp = end + std::chrono::seconds(60);
    std::size_t next = 0;
    std::deque<std::size_t> waiting;  // due, no connection free yet
    std::array<epoll_event, 256> events{};
    while (true) {
      Clock::time_point now = Clock::now();
      if (open) {
        for (; next < due.size() && start_ + due[next] <= now; ++next) waiting.push_back(next);
        while (!waiting.empty() && !idle_.empty()) {
          const std::size_t k = waiting.front();
          waiting.pop_front();
          send(take(), start_ + due[k]);
        }
      } else if (now < end) {
        while (!idle_.empty()) send(take(), Clock::now());
      }
      const bool sent = open ? next == due.size() && waiting.empty() : now >= end;
      if ((sent && busy_ == 0) || now >= giveUp || connected_ == 0) break;
      // Sleep until the next request is due or an answer comes.
      Clock::duration wait = std::chrono::milliseconds(100);
      if (open && next < due.size() && waiting.empty()) wait = std::min(wait, start_ + due[next] - now);
      if (!open && now < end) wait = std::min(wait, end - now);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(wait, Clock::duration::zero()));
      const timespec timeout{static_cast<time_t>(ns.count() / 1000000000), static_cast<long>(ns.count() % 1000000000)};
      int n = pwait2_ ? ::epoll_pwait2(epoll_, events.data(), static_cast<int>(events.size()), &timeout, nullptr) : -1;
      if (n < 0 && pwait2_ && (errno == ENOSYS || errno == EPERM)) pwait2_ = false;  // a kernel before 5.11, or seccomp
      if (!pwait2_) {
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(ns).count();
        n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), static_cast<int>(ms));
      }
      for (int i = 0; i < n; ++i) receive(events[i].data.u64);
    }
    result_.errors += busy_ + static_cast<int>(waiting.size() + (due.size() - next));
    if (busy_ > 0 && result_.firstError.empty()) result_.firstError = "no answer within 60 s of the load's end";
    result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return std::move(result_);
  }

 private:
  void open(std::size_t i) {
    Connection& c = connections_[i];
    c = Connection{};
    c.fd = connectTo(s_);
    if (c.fd < 0) {
      // Not a failed request (those are counted as such): why the next ones will fail.
      if (result_.firstError.empty())
        result_.firstError = "connection: cannot connect to " + s_.host + ":" + std::to_string(s_.port) + ": " + std::strerror(errno);
      return;
    }
    ++connected_;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = i;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &e);
    idle_.push_back(i);
  }

  std::size_t take() {
    const std::size_t i = idle_.back();
    idle_.pop_back();
    return i;
  }

  void send(std::size_t i, Clock::time_point due) {
    Connection& c = connections_[i];
    c.busy = true;
    c.due = due;
    ++busy_;
    if (!sendAll(c.fd, request_)) lost(i, "connection: the request could not be sent");
  }

  void receive(std::size_t i) {
    Connection& c = connections_[i];
    std::array<char, 16384> buffer;
    std::string ended;  // why the connection ended, if it did
    while (true) {
      const ssize_t n = ::recv(c.fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buffer.data(), static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      ended = n == 0 ? "connection: closed by the server" : std::string("connection: ") + std::strerror(errno);
      break;
    }
    // An answer that came with the server's close counts as the answer it is.
    bool close = false;
    while (c.busy && !close) {
      int status = 0;
      std::string body;
      const std::size_t used = answerIn(c.in, status, body, close);
      if (used == 0) break;
      c.in.erase(0, used);
      if (status == 0) continue;  // 100 Continue
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - c.due).count();
      if (status == 200) {
        result_.latenciesMs.push_back(ms);
        result_.dueS.push_back(std::chrono::duration<double>(c.due - start_).count());
      } else {
        fail("HTTP " + std::to_string(status) + ": " + body.substr(0, 200));
      }
      c.busy = false;
      --busy_;
      if (!close) idle_.push_back(i);
    }
    if (!ended.empty()) return lost(i, ended);
    if (close) reopen(i);
  }

  // The connection failed with a request in flight: that request failed; a new connection
  // takes the connection's place.
  void lost(std::size_t i, const std::string& why) {
    if (connections_[i].busy) {
      --busy_;
      fail(why);
    } else {
      std::erase(idle_, i);  // open() gives it back
    }
    reopen(i);
  }

  void reopen(std::size_t i) {
    Connection& c = connections_[i];
    if (c.fd >= 0) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
      ::close(c.fd);
      --connected_;
    }
    open(i);
  }

  void fail(const std::string& why) {
    if (result_.errors++ == 0) result_.firstError = why;
  }

  const LoadSpec& s_;
  const int epoll_;
  std::string request_;
  std::vector<Connection> connections_;
  std::vector<std::size_t> idle_;
  int busy_ = 0;
  int connected_ = 0;
  bool pwait2_ = true;  // epoll_pwait2's microseconds, while the kernel has it
  Clock::time_point start_{};
  LoadResult result_;
};

}  // namespace

LoadResult runLoad(const LoadSpec& s) {
  if (s.port <= 0 || s.path.empty()) throw InvalidArgument("a load needs the server's port and a path");
  return Load(s).run();
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace gyre::app
