// gyre serve's own ingress (serve/http_server.h) behind a Server, on loopback under real clients
// (Python's sockets and http.client; the parser and the bare server have tests/unit/http_server_test.cc):
// a slow-loris client that trickles bytes gets 408 at --read-timeout while others are answered,
// hundreds of stalled connections hold no one else up, pipelined requests are answered in order,
// Expect: 100-continue and chunked bodies are read, a wrong method is 405.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gyre/serve.h"
#include "serve_http.h"
#include "support/programs.h"

namespace gyre::serve {
namespace {

using nlohmann::json;
using test::contains;

// rows -> rows * 2, on a Server of two replicas with a 1 s --read-timeout.
class ServeIngress : public ::testing::Test {
 protected:
  void SetUp() override {
    ServedModel m;
    m.name = "doubler";
    m.rowShape = {2};
    m.makeReplica = [] { return [](const ::torch::Tensor& rows) { return rows * 2; }; };
    ServeOptions o;
    o.port = 0;
    o.replicas = 2;
    o.readTimeoutS = 1;
    server_ = std::make_unique<::gyre::serve::Server>(std::move(m), o);
    server_->start();
  }
  void TearDown() override { server_->stop(); }

  // Runs a Python client given the port as argv[1]; its stdout.
  std::string python(const std::string& code, int timeoutS = 60) {
    const test::ProgramRun r = test::runProgram(
        {{"/usr/bin/python3", "-c", code, std::to_string(server_->port())}, test::cleanEnvironment()},
        std::chrono::seconds(timeoutS));
    EXPECT_EQ(r.exitCode, 0) << r.describe() << r.err;
    return r.out;
  }

  std::unique_ptr<::gyre::serve::Server> server_;  // qualified: the CLI tests have a Server of their own
};

// A client that sends a byte every 0.2 s never finishes its headers in time: 408 after the 1 s
// --read-timeout (a per-read timeout would hold it as long as it trickles), while another client
// is answered meanwhile; 200 connections that stall halfway (each held a thread of cpp-httplib's)
// are answered 408 at their timeout without holding up a client that comes after them.
TEST_F(ServeIngress, SlowClientsAreAnswered408InTimeAndHoldNoOneUp) {
  const std::string out = python(
      "import http.client, json, socket, sys, threading, time\n"
      "port = int(sys.argv[1])\n"
      "def trickle(out):\n"
      "  s = socket.create_connection(('127.0.0.1', port)); t = time.time(); data = b''\n"
      "  s.settimeout(0.2)\n"
      "  for b in b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 20\\r\\n\\r\\n':\n"
      "    try:\n"
      "      s.sendall(bytes([b])); data += s.recv(4096)\n"
      "      if data: break\n"
      "    except socket.timeout: pass\n"
      "    except OSError: break\n"
      "  out.append((data.split(b'\\r\\n')[0].decode(), time.time() - t < 3))\n"
      "got = []; th = threading.Thread(target=trickle, args=(got,)); th.start()\n"
      "stalled = [socket.create_connection(('127.0.0.1', port)) for _ in range(200)]\n"
      "for s in stalled: s.sendall(b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nContent-Le')\n"
      "c = http.client.HTTPConnection('127.0.0.1', port, timeout=10); codes = []\n"
      "for i in range(20):\n"
      "  c.request('POST', '/v1/models/doubler:predict', body=json.dumps({'instances': [[i, 1]]}))\n"
      "  r = c.getresponse(); codes.append((r.status, json.loads(r.read())['predictions'][0][0]))\n"
      "print('answered', all(s == 200 for s, _ in codes), [v for _, v in codes][:3])\n"
      "th.join(); print('trickle', got[0])\n"
      "statuses = set()\n"
      "for s in stalled:\n"
      "  s.settimeout(10)\n"
      "  try: statuses.add(s.recv(100).split(b' ')[1].decode())\n"
      "  except Exception as e: statuses.add(type(e).__name__)\n"
      "print('stalled', sorted(statuses))\n");
  EXPECT_TRUE(contains(out, "answered True [0.0, 2.0, 4.0]")) << out;
  EXPECT_TRUE(contains(out, "trickle ('HTTP/1.1 408 Request Timeout', True)")) << out;
  // Each stalled one got its 408 at its timeout, none was left hanging.
  EXPECT_TRUE(contains(out, "stalled ['408']")) << out;
}

TEST_F(ServeIngress, PipelinedExpectContinueAndChunkedRequestsAreAnswered) {
  const std::string out = python(
      "import socket, sys\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.settimeout(10)\n"
      "buf = b''\n"
      "def answers(n):\n"
      "  global buf; out = []\n"
      "  while len(out) < 2 * n:\n"
      "    while b'\\r\\n\\r\\n' not in buf: buf += s.recv(65536)\n"
      "    head, buf = buf.split(b'\\r\\n\\r\\n', 1)\n"
      "    length = int([l.split(b':')[1] for l in head.split(b'\\r\\n') if l.lower().startswith(b'content-length')][0])\n"
      "    while len(buf) < length: buf += s.recv(65536)\n"
      "    out += [head.split(b'\\r\\n')[0].decode(), buf[:length].decode()]; buf = buf[length:]\n"
      "  return out\n"
      "body = b'{\"instances\": [[1, 2]]}'\n"
      "one = b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nContent-Length: %d\\r\\n\\r\\n%s' % (len(body), body)\n"
      "s.sendall(one + one.replace(b'[[1, 2]]', b'[[3, 4]]') + b'GET /healthz HTTP/1.1\\r\\n\\r\\n')\n"
      "print(answers(3))\n"
      "s.sendall(b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nExpect: 100-continue\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(body))\n"
      "print(s.recv(100))\n"
      "s.sendall(body); print(answers(1))\n"
      "s.sendall(b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n'\n"
      "          b'5\\r\\n{\"ins\\r\\n%x\\r\\n%s\\r\\n0\\r\\n\\r\\n' % (len(body) - 5, body[5:]))\n"
      "print(answers(1))\n"
      "s.sendall(b'GET /v1/models/doubler:predict HTTP/1.1\\r\\n\\r\\n'); print(answers(1))\n"
      // 20,000 pipelined at once (sent from a thread while this one reads): each answered, in turn.
      "import threading\n"
      "t = threading.Thread(target=s.sendall, args=(b'GET /healthz HTTP/1.1\\r\\n\\r\\n' * 20000,)); t.start()\n"
      "got = answers(20000); t.join(); print('pipelined', len(got) // 2, set(got))\n");
  EXPECT_TRUE(contains(out, "['HTTP/1.1 200 OK', '{\"predictions\":[[2.0,4.0]]}', 'HTTP/1.1 200 OK', "
                            "'{\"predictions\":[[6.0,8.0]]}', 'HTTP/1.1 200 OK', '{\"status\":\"alive\"}']"))
      << out;
  EXPECT_TRUE(contains(out, "b'HTTP/1.1 100 Continue\\r\\n\\r\\n'")) << out;
  EXPECT_TRUE(contains(out, "['HTTP/1.1 200 OK', '{\"predictions\":[[2.0,4.0]]}']\n['HTTP/1.1 200 OK', "
                            "'{\"predictions\":[[2.0,4.0]]}']"))
      << out;
  EXPECT_TRUE(contains(out, "405 Method Not Allowed")) << out;
  EXPECT_TRUE(contains(out, "is not served (POST is)")) << out;
  EXPECT_TRUE(contains(out, "pipelined 20000 {")) << out;
  EXPECT_TRUE(contains(out, "'HTTP/1.1 200 OK'")) << out;
  EXPECT_FALSE(contains(out.substr(out.find("pipelined")), "error")) << out;
}

// Bytes that are not UTF-8 in what a refusal quotes (the answer is JSON all the same, and the
// server goes on), a client that pipelines two requests and half-closes (both answered), a HEAD
// (the GET's headers, no body: the next request on the connection is read right).
TEST_F(ServeIngress, HostileBytesHalfClosesAndHeadsAreAnswered) {
  const std::string out = python(
      "import json, socket, sys\n"
      "port = int(sys.argv[1])\n"
      "def exchange(data, half_close=False):\n"
      "  s = socket.create_connection(('127.0.0.1', port)); s.settimeout(10); s.sendall(data)\n"
      "  if half_close: s.shutdown(socket.SHUT_WR)\n"
      "  got = b''\n"
      "  while True:\n"
      "    b = s.recv(65536)\n"
      "    if not b: return got\n"
      "    got += b\n"
      "for bad in [b'GET / HTTP/1.\\xff\\r\\n\\r\\n', b'POST /x HTTP/1.1\\r\\nTransfer-Encoding: \\xc3\\r\\n\\r\\n',\n"
      "            b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nContent-Type: application/octet-stream\\r\\n'\n"
      "            b'X-Gyre-Shape: \\xff\\r\\nContent-Length: 70000\\r\\nConnection: close\\r\\n\\r\\n' + b'0' * 70000]:\n"
      "  answer = exchange(bad)\n"
      "  head, body = answer.split(b'\\r\\n\\r\\n', 1)\n"
      "  print(head.split(b'\\r\\n')[0].decode(), 'error' in json.loads(body))\n"
      "body = b'{\"instances\": [[1, 2]]}'\n"
      "one = b'POST /v1/models/doubler:predict HTTP/1.1\\r\\nContent-Length: %d\\r\\n\\r\\n%s' % (len(body), body)\n"
      "print('half-closed', exchange(one + one, half_close=True).count(b'[[2.0,4.0]]'))\n"
      "answer = exchange(b'HEAD /healthz HTTP/1.1\\r\\n\\r\\nGET /healthz HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n')\n"
      "print('head', answer.count(b'HTTP/1.1 200 OK'), answer.count(b'{\"status\":\"alive\"}'))\n");
  EXPECT_TRUE(contains(out, "HTTP/1.1 505 HTTP Version Not Supported True")) << out;
  EXPECT_TRUE(contains(out, "HTTP/1.1 501 Not Implemented True")) << out;
  EXPECT_TRUE(contains(out, "HTTP/1.1 400 Bad Request True")) << out;
  EXPECT_TRUE(contains(out, "half-closed 2")) << out;
  EXPECT_TRUE(contains(out, "head 2 1")) << out;
  EXPECT_EQ(request(server_->port(), "GET", "/healthz").status, 200);
}

}  // namespace
}  // namespace gyre::serve
