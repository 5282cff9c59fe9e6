// gyre serve's ingress without a model (libtorch-free, so the sanitizer stages run it): the request
// parser on bytes as they come, and the epoll server on loopback with raw sockets: answers given
// from other threads reach their requests in order, stop() answers every accepted request before
// serve() returns, a request not whole in time gets 408, connections beyond the limit get 503.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/http_request.h"
#include "serve/http_server.h"
#include "support/programs.h"

namespace gyre::serve {
namespace {

using test::contains;
using Progress = RequestParser::Progress;

// Feeds the parser what `in` holds, dropping what it took, as the server does.
Progress feed(RequestParser& p, std::string& in) {
  std::size_t used = 0;
  const Progress got = p.feed(in, used);
  in.erase(0, used);
  return got;
}

// Feeds `bytes` one at a time, as the slowest client sends them; the progress after each.
std::vector<Progress> feedByteByByte(RequestParser& p, const std::string& bytes, std::string& in) {
  std::vector<Progress> seen;
  for (const char b : bytes) {
    in.push_back(b);
    Progress got = feed(p, in);
    if (got == Progress::kHeaders) got = feed(p, in);
    seen.push_back(got);
    if (got == Progress::kDone || got == Progress::kFailed) break;
  }
  return seen;
}

TEST(ServeHttpRequest, ARequestArrivingAByteAtATimeIsReadWhole) {
  RequestParser p({});
  std::string in;
  const std::string request =
      "POST /v1/models/m:predict?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\n"
      "content-length: 5\r\n\r\nhello";
  const std::vector<Progress> seen = feedByteByByte(p, request, in);
  ASSERT_EQ(seen.back(), Progress::kDone);
  EXPECT_EQ(seen.size(), request.size());
  const HttpRequest r = p.take();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/models/m:predict?x=1");
  EXPECT_EQ(r.path, "/v1/models/m:predict");
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.keepAlive());
  EXPECT_TRUE(in.empty());
}

TEST(ServeHttpRequest, PipelinedRequestsComeOneAfterTheOther) {
  RequestParser p({});
  std::string in =
      "GET /healthz HTTP/1.1\r\n\r\nPOST /a HTTP/1.0\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nokGET /b HTTP/1.1\r\n"
      "Connection: close\r\n\r\n";
  std::vector<HttpRequest> got;
  for (int i = 0; i < 10 && got.size() < 3; ++i) {
    const Progress s = feed(p, in);
    ASSERT_NE(s, Progress::kFailed) << p.error();
    if (s == Progress::kDone) got.push_back(p.take());
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].path, "/healthz");
  EXPECT_EQ(got[1].body, "ok");
  EXPECT_EQ(got[1].minorVersion, 0);
  EXPECT_TRUE(got[1].keepAlive());
  EXPECT_EQ(got[2].path, "/b");
  EXPECT_FALSE(got[2].keepAlive());
  EXPECT_EQ(feed(p, in), Progress::kMore);
}

TEST(ServeHttpRequest, AChunkedBodyIsJoined) {
  RequestParser p({});
  std::string in;
  const std::string request =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: t\r\n\r\n";
  ASSERT_EQ(feedByteByByte(p, request, in).back(), Progress::kDone);
  EXPECT_EQ(p.take().body, "hello world");
}

TEST(ServeHttpRequest, BadRequestsAreRefusedWithTheirStatus) {
  struct Case {
    std::string bytes;
    int status;
    std::string says;
  };
  const HttpLimits limits{.maxHeaderBytes = 1024, .maxBodyBytes = 100};
  const std::vector<Case> cases = {
      {"GARBAGE\r\n\r\n", 400, "request line"},
      {"GET /x HTTP/2.0\r\n\r\n", 505, "HTTP version"},
      {"GET /x HTTP/1.1\r\nno colon here\r\n\r\n", 400, "NAME: VALUE"},
      {"POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "--max-body-bytes"},
      {"POST /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400, "not a number"},
      {"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "gzip"},
      {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "hexadecimal"},
      {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413, "--max-body-bytes"},
      {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", 400, "does not end with CRLF"},
      {"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "two different Content-Lengths"},
      {"GET /x HTTP/1.1\r\nX: " + std::string(2000, 'a'), 431, "larger than 1 KiB"},
  };
  for (const Case& c : cases) {
    RequestParser p(limits);
    std::string in;
    EXPECT_EQ(feedByteByByte(p, c.bytes, in).back(), Progress::kFailed) << c.bytes.substr(0, 40);
    EXPECT_EQ(p.status(), c.status) << c.bytes.substr(0, 40);
    EXPECT_TRUE(contains(p.error(), c.says)) << p.error();
  }
}

// A connection to the server, as a client that writes what it is given and reads whole answers.
class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval t{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  }
  ~Client() { ::close(fd_); }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // The next answer as "STATUS BODY", or "closed" when the server closed first.
  std::string answer() {
    while (true) {
      const std::size_t head = in_.find("\r\n\r\n");
      if (head != std::string::npos) {
        const std::size_t at = in_.find("Content-Length: ");
        const std::size_t length = std::stoul(in_.substr(at + 16));
        if (in_.size() >= head + 4 + length) {
          std::string a = in_.substr(9, 3) + " " + in_.substr(head + 4, length);
          in_.erase(0, head + 4 + length);
          return a;
        }
      }
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return "closed";
      in_.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
  std::string in_;
};

std::string post(const std::string& body) {
  return "POST /echo HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A server whose handler hands each request to a thread of its own, which answers it with its
// body some time later (as a replica answers a batch), newest first when several wait.
class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerOptions o) {
    server_ = std::make_unique<HttpServer>(std::move(o), [this](HttpRequest&& r, HttpServer::Reply reply) {
      std::lock_guard lock(mu_);
      waiting_.emplace_back(std::move(r.body), std::move(reply));
      ++handed_;
    });
    port_ = server_->listen("127.0.0.1", 0, "--port");
    answerer_ = std::thread([this] {
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::deque<std::pair<std::string, HttpServer::Reply>> now;
        {
          std::lock_guard lock(mu_);
          if (!hold_) now.swap(waiting_);
        }
        while (!now.empty()) {
          HttpResponse r;
          r.body = now.back().first;
          now.back().second(std::move(r));
          now.pop_back();
        }
      }
    });
    loop_ = std::thread([this] {
      server_->serve();
      returned_ = true;
    });
  }
  void TearDown() override {
    server_->stop();
    if (loop_.joinable()) loop_.join();
    done_ = true;
    answerer_.join();
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread loop_, answerer_;
  std::atomic<bool> done_{false};
  std::atomic<bool> hold_{false};  // the answerer answers nothing while set
  std::atomic<int> handed_{0};     // requests the handler got
  std::atomic<bool> returned_{false};
  std::mutex mu_;
  std::deque<std::pair<std::string, HttpServer::Reply>> waiting_;
};

TEST_F(HttpServerTest, AnswersFromOtherThreadsReachTheirRequestsInOrder) {
  start({});
  std::vector<std::thread> clients;
  std::atomic<int> right{0};
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&, c] {
      Client client(port_);
      std::string pipelined;
      for (int i = 0; i < 50; ++i) pipelined += post(std::to_string(c) + "/" + std::to_string(i));
      client.send(pipelined);
      for (int i = 0; i < 50; ++i)
        if (client.answer() == "200 " + std::to_string(c) + "/" + std::to_string(i)) ++right;
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(right.load(), 400);
}

TEST_F(HttpServerTest, StopAnswersEveryAcceptedRequestBeforeServeReturns) {
  start({});
  hold_ = true;
  Client a(port_), b(port_), idle(port_);
  a.send(post("a"));
  b.send(post("b"));
  for (int i = 0; i < 1000 && handed_ < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(handed_.load(), 2);
  server_->stop();
  EXPECT_EQ(idle.answer(), "closed");  // idle: closed at the stop
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(returned_.load());  // two requests are still unanswered
  hold_ = false;
  loop_.join();  // serve() returned: what it accepted was answered and written
  EXPECT_EQ(a.answer(), "200 a");
  EXPECT_EQ(b.answer(), "200 b");
  EXPECT_EQ(a.answer(), "closed");
}

TEST_F(HttpServerTest, ARequestNotWholeInTimeGets408AndTheLimitGets503) {
  HttpServerOptions o;
  o.requestTimeout = std::chrono::milliseconds(300);
  o.maxConnections = 2;
  o.timeoutMessage = "late";
  o.overflowMessage = "full";
  start(o);
  Client slow(port_), other(port_);
  slow.send("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345");
  Client third(port_);  // beyond the 2
  EXPECT_EQ(third.answer(), "503 full");
  other.send(post("meanwhile"));
  EXPECT_EQ(other.answer(), "200 meanwhile");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(slow.answer(), "408 late");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(slow.answer(), "closed");
  EXPECT_EQ(server_->refused(), 1u);
}

}  // namespace
}  // namespace gyre::serve
