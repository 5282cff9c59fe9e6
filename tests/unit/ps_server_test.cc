// The parameter server driven in-process through raw sockets: the wire protocol's semantics
// (declare, init, push under bsp/asp/ssp, pull, clock, replication, failover to the backup,
// time-outs) and the refusal of malformed or unauthenticated clients.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/auth.h"
#include "common/socket.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "ps/plan.h"
#include "ps/protocol.h"
#include "support/flood.h"

namespace gyre::ps {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kServerTestSecret[] = "ps-server-test-secret";

struct Response {
  Header header;
  std::vector<std::uint8_t> payload;
  std::string text() const { return std::string(payload.begin(), payload.end()); }
  std::vector<float> floats() const {
    std::vector<float> out(payload.size() / sizeof(float));
    std::memcpy(out.data(), payload.data(), out.size() * sizeof(float));
    return out;
  }
};

std::span<const std::uint8_t> bytesOf(const std::vector<float>& v) {
  return {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(float)};
}

net::Fd authenticatedSocket(const std::string& address, const std::string& secret = kServerTestSecret) {
  const auto [host, port] = net::splitHostPort(address);
  net::Fd fd = net::connectTo(host, port, Deadline::after(seconds(5)));
  auth::handshakeAsClient(fd.get(), secret, kPsAuthContext, Deadline::after(seconds(5)));
  return fd;
}

// A worker (or a server peer) speaking the wire protocol by hand.
class Client {
 public:
  Client(const std::string& address, std::uint32_t worker)
      : fd_(authenticatedSocket(address)), worker_(worker) {
    Header hello;
    hello.type = Type::kHello;
    hello.worker = worker;
    EXPECT_EQ(call(hello).header.status, Status::kOk);
  }

  std::uint32_t send(Header h, std::span<const std::uint8_t> payload = {}) {
    h.id = nextId_++;
    h.payloadBytes = payload.size();
    std::uint8_t head[kHeaderBytes];
    encodeHeader(h, head);
    net::writeAll(fd_.get(), head, kHeaderBytes, Deadline::after(seconds(5)));
    if (!payload.empty())
      net::writeAll(fd_.get(), payload.data(), payload.size(), Deadline::after(seconds(5)));
    return h.id;
  }

  Response receive(milliseconds within = milliseconds(5000)) {
    std::uint8_t head[kHeaderBytes];
    net::readAll(fd_.get(), head, kHeaderBytes, Deadline::after(within));
    Response r;
    r.header = decodeHeader(head);
    EXPECT_TRUE(r.header.response);
    r.payload.resize(r.header.payloadBytes);
    if (!r.payload.empty())
      net::readAll(fd_.get(), r.payload.data(), r.payload.size(), Deadline::after(within));
    return r;
  }

  Response call(Header h, std::span<const std::uint8_t> payload = {}) {
    const std::uint32_t id = send(h, payload);
    Response r = receive();
    EXPECT_EQ(r.header.id, id);
    return r;
  }

  // True when a response arrives within `within` (it is left unread).
  bool answered(milliseconds within) {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(within.count())) == 1;
  }

  Response declare(const Declaration& d) {
    Header h;
    h.type = Type::kDeclare;
    h.worker = worker_;
    return call(h, encodeDeclaration(d));
  }
  Header sliceHeader(Type type, int slice, std::int64_t a = 0, std::int64_t b = 0, float lr = 0) const {
    Header h;
    h.type = type;
    h.slice = static_cast<std::uint32_t>(slice);
    h.worker = worker_;
    h.a = a;
    h.b = b;
    h.lr = lr;
    return h;
  }
  Response init(int slice, const std::vector<float>& values) {
    return call(sliceHeader(Type::kInit, slice), bytesOf(values));
  }
  Response push(int slice, std::int64_t seq, std::int64_t base, float lr, const std::vector<float>& grad) {
    return call(sliceHeader(Type::kPush, slice, seq, base, lr), bytesOf(grad));
  }
  Response pull(int slice, std::int64_t minVersion = 0) {
    return call(sliceHeader(Type::kPull, slice, minVersion));
  }
  std::vector<float> pullValues(int slice, std::int64_t minVersion = 0) {
    Response r = pull(slice, minVersion);
    EXPECT_EQ(r.header.status, Status::kOk) << r.text();
    return r.floats();
  }
  ServerStats stats() {
    Header h;
    h.type = Type::kStats;
    return decodeServerStats(call(h).payload);
  }

  int fd() const { return fd_.get(); }

 private:
  net::Fd fd_;
  std::uint32_t worker_;
  std::uint32_t nextId_ = 1;
};

ServerOptions serverOptions(int index, int numServers, milliseconds timeout = milliseconds(10000)) {
  ServerOptions o;
  o.index = index;
  o.numServers = numServers;
  o.secret = kServerTestSecret;
  o.timeout = timeout;
  return o;
}

// A job of `numServers` servers and a declaration for `numWorkers` workers.
struct Job {
  Job(int numServers, std::uint32_t numWorkers, TableSpec spec, milliseconds timeout = milliseconds(10000)) {
    for (int s = 0; s < numServers; ++s) {
      servers.push_back(Server::start(serverOptions(s, numServers, timeout)));
      declaration.servers.push_back(servers.back()->address());
    }
    declaration.spec = std::move(spec);
    declaration.numWorkers = numWorkers;
    plan = Plan::make(declaration.spec.sizes, numServers);
  }
  // A worker connected to server s that declared the table.
  std::unique_ptr<Client> worker(int s, std::uint32_t id) {
    auto c = std::make_unique<Client>(servers[static_cast<std::size_t>(s)]->address(), id);
    EXPECT_EQ(c->declare(declaration).header.status, Status::kOk);
    return c;
  }
  std::vector<std::unique_ptr<Server>> servers;
  Declaration declaration;
  Plan plan;
};

TableSpec specOf(std::vector<std::size_t> sizes, const std::string& mode = "asp", float momentum = 0) {
  TableSpec spec;
  spec.sizes = std::move(sizes);
  spec.mode = Mode::parse(mode);
  spec.optimizer.momentum = momentum;
  return spec;
}

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

bool waitForRefused(const Server& server, std::uint64_t n) {
  const auto deadline = Clock::now() + seconds(5);
  while (server.stats().refusedConnections < n) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

void expectClosedByServer(int fd) {
  std::uint8_t byte = 0;
  EXPECT_THROW(net::readAll(fd, &byte, 1, Deadline::after(seconds(4))), net::ConnectionClosed);
}

TEST(PsServer, DeclareInitPullAcrossServers) {
  Job job(2, 1, specOf({6, 4}));
  // 10 floats on 2 servers: key 0 [0, 5) on server 0, key 0 [5, 6) and key 1 on server 1.
  ASSERT_EQ(job.plan.slices.size(), 3u);
  EXPECT_EQ(job.plan.slices[0].primary, 0);
  EXPECT_EQ(job.plan.slices[1].primary, 1);
  EXPECT_EQ(job.plan.slices[2].primary, 1);
  std::vector<std::unique_ptr<Client>> to;
  for (int s = 0; s < 2; ++s) to.push_back(job.worker(s, 0));
  for (const Slice& slice : job.plan.slices) {
    const auto values = iota(slice.length, 10.0f * static_cast<float>(slice.id));
    auto& primary = *to[static_cast<std::size_t>(slice.primary)];
    EXPECT_EQ(primary.init(slice.id, values).header.status, Status::kOk);
    EXPECT_EQ(primary.init(slice.id, iota(slice.length, -1)).header.status,
              Status::kOk);  // the first one stays
    const Response r = primary.pull(slice.id);
    EXPECT_EQ(r.header.a, 0);
    EXPECT_EQ(r.floats(), values);
  }
  EXPECT_GT(to[0]->stats().bytesIn, 0u);
  // An unknown slice is refused, the connection stays usable.
  const Response unknown = to[0]->pull(7);
  EXPECT_EQ(unknown.header.status, Status::kError);
  EXPECT_NE(unknown.text().find("unknown slice"), std::string::npos) << unknown.text();
  EXPECT_EQ(to[0]->pull(0).header.status, Status::kOk);
}

TEST(PsServer, SliceNeitherLedNorBackedIsRefused) {
  Job job(3, 1, specOf({9}));
  auto c = job.worker(2, 0);  // slice 0 is on server 0, backed by server 1
  const Response r = c->pull(0);
  EXPECT_EQ(r.header.status, Status::kError);
  EXPECT_NE(r.text().find("not on this one"), std::string::npos) << r.text();
  EXPECT_EQ(c->stats().refusedConnections, 0u);  // the connection stays usable
}

TEST(PsServer, AspPushAppliesGradientOverWorkers) {
  Job job(1, 2, specOf({4}, "asp"));
  auto w0 = job.worker(0, 0);
  auto w1 = job.worker(0, 1);
  ASSERT_EQ(w0->init(0, {1, 2, 3, 4}).header.status, Status::kOk);
  Response r = w0->push(0, 0, 0, 0.5f, {2, 2, 2, 2});
  ASSERT_EQ(r.header.status, Status::kOk) << r.text();
  EXPECT_EQ(r.header.a, 1);
  EXPECT_EQ(r.header.b, 0);
  EXPECT_EQ(w0->pullValues(0), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));  // p - 0.5 * (2 / 2)
  r = w1->push(0, 0, 0, 1.0f, {4, 0, 0, -4});  // computed from version 0: staleness 1
  ASSERT_EQ(r.header.status, Status::kOk) << r.text();
  EXPECT_EQ(r.header.a, 2);
  EXPECT_EQ(r.header.b, 1);
  EXPECT_EQ(w1->pullValues(0), (std::vector<float>{-1.5f, 1.5f, 2.5f, 5.5f}));
  const ServerStats stats = job.servers[0]->stats();
  EXPECT_EQ(stats.updates, 2u);
  EXPECT_EQ(stats.staleness[0], 1u);
  EXPECT_EQ(stats.staleness[1], 1u);
}

TEST(PsServer, BspAnswersAfterEveryWorkerAveragedInWorkerOrder) {
  Job job(1, 3, specOf({2}, "bsp"));
  std::vector<std::unique_ptr<Client>> w;
  for (std::uint32_t i = 0; i < 3; ++i) w.push_back(job.worker(0, i));
  ASSERT_EQ(w[0]->init(0, {5, 5}).header.status, Status::kOk);
  // In worker order (1e8 + 1) - 1e8 is 0 in float; in arrival order (2, 0, 1) it would be 1.
  const std::vector<std::vector<float>> grads = {{1e8f, 3}, {1, 3}, {-1e8f, 3}};
  w[2]->send(w[2]->sliceHeader(Type::kPush, 0, 0, 0, 1.0f), bytesOf(grads[2]));
  w[0]->send(w[0]->sliceHeader(Type::kPush, 0, 0, 0, 1.0f), bytesOf(grads[0]));
  EXPECT_FALSE(w[2]->answered(milliseconds(150)));
  EXPECT_FALSE(w[0]->answered(milliseconds(1)));
  // A second push of the step is refused.
  const Response twice = w[0]->push(0, 1, 0, 1.0f, grads[0]);
  EXPECT_EQ(twice.header.status, Status::kError);
  EXPECT_NE(twice.text().find("worker 0 pushed key 0 twice in step 0"), std::string::npos) << twice.text();
  w[1]->send(w[1]->sliceHeader(Type::kPush, 0, 0, 0, 1.0f), bytesOf(grads[1]));
  for (int i : {0, 1, 2}) {
    const Response r = w[static_cast<std::size_t>(i)]->receive();
    EXPECT_EQ(r.header.status, Status::kOk) << r.text();
    EXPECT_EQ(r.header.a, 1);
    EXPECT_EQ(r.header.b, 0);
  }
  const float second = 5.0f - (3.0f + 3.0f + 3.0f) * (1.0f / 3.0f);
  EXPECT_EQ(w[1]->pullValues(0, 1), (std::vector<float>{5.0f, second}));
  EXPECT_EQ(job.servers[0]->stats().updates, 1u);
}

TEST(PsServer, PullWaitsForInitAndMinVersion) {
  Job job(1, 1, specOf({3}, "asp"));
  auto c = job.worker(0, 0);
  auto early = job.worker(0, 0);
  early->send(early->sliceHeader(Type::kPull, 0, 0));  // before init: parked
  EXPECT_FALSE(early->answered(milliseconds(100)));
  ASSERT_EQ(c->init(0, {1, 1, 1}).header.status, Status::kOk);
  EXPECT_EQ(early->receive().floats(), (std::vector<float>{1, 1, 1}));

  const std::uint32_t pullId = c->send(c->sliceHeader(Type::kPull, 0, 1));
  EXPECT_FALSE(c->answered(milliseconds(100)));
  const std::uint32_t pushId = c->send(c->sliceHeader(Type::kPush, 0, 0, 0, 1.0f), bytesOf({1, 2, 3}));
  for (int i = 0; i < 2; ++i) {
    const Response r = c->receive();
    ASSERT_EQ(r.header.status, Status::kOk) << r.text();
    EXPECT_EQ(r.header.a, 1);
    if (r.header.id == pullId)
      EXPECT_EQ(r.floats(), (std::vector<float>{0, -1, -2}));
    else
      EXPECT_EQ(r.header.id, pushId);
  }
}

TEST(PsServer, DuplicatePushIsAnsweredWithoutReapplying) {
  Job job(1, 1, specOf({2}, "asp"));
  auto c = job.worker(0, 0);
  ASSERT_EQ(c->init(0, {0, 0}).header.status, Status::kOk);
  EXPECT_EQ(c->push(0, 0, 0, 1.0f, {1, 1}).header.a, 1);
  const Response again = c->push(0, 0, 0, 1.0f, {1, 1});
  EXPECT_EQ(again.header.status, Status::kOk);
  EXPECT_EQ(again.header.a, 1);
  EXPECT_EQ(c->pullValues(0), (std::vector<float>{-1, -1}));
  EXPECT_EQ(job.servers[0]->stats().updates, 1u);
}

TEST(PsServer, SeqGapIsRefused) {
  Job job(1, 1, specOf({2}, "asp"));
  auto c = job.worker(0, 0);
  ASSERT_EQ(c->init(0, {0, 0}).header.status, Status::kOk);
  const Response r = c->push(0, 1, 0, 1.0f, {1, 1});
  EXPECT_EQ(r.header.status, Status::kError);
  EXPECT_NE(r.text().find("seq gap"), std::string::npos) << r.text();
  EXPECT_EQ(c->pullValues(0), (std::vector<float>{0, 0}));
  EXPECT_EQ(c->push(0, 0, 0, 1.0f, {1, 1}).header.status, Status::kOk);
}

TEST(PsServer, RequestsOutsideTheDeclaredTableAreRefused) {
  Job job(1, 2, specOf({4, 4, 4}));
  Client first(job.servers[0]->address(), 0);
  const Response before = first.pull(0);
  EXPECT_EQ(before.header.status, Status::kError);
  EXPECT_NE(before.text().find("before any worker declared"), std::string::npos) << before.text();
  // A push before the declaration: its payload cannot be checked yet, so it is skipped.
  const Response push = first.push(0, 0, 0, 1.0f, {1, 2, 3, 4});
  EXPECT_EQ(push.header.status, Status::kError);
  ASSERT_EQ(first.declare(job.declaration).header.status, Status::kOk);

  Client second(job.servers[0]->address(), 1);
  Declaration other = job.declaration;
  other.spec.sizes.push_back(4);
  Response r = second.declare(other);
  EXPECT_EQ(r.header.status, Status::kError);
  EXPECT_NE(r.text().find("worker 1 declared 4 keys, the table has 3"), std::string::npos) << r.text();
  other = job.declaration;
  other.spec.mode = Mode::parse("ssp:2");
  r = second.declare(other);
  EXPECT_NE(r.text().find("mode ssp:2, the table has asp"), std::string::npos) << r.text();
  other = job.declaration;
  other.servers.push_back("127.0.0.1:1");
  r = second.declare(other);
  EXPECT_NE(r.text().find("declared 2 servers, this server was started as one of 1"), std::string::npos)
      << r.text();
  EXPECT_EQ(second.declare(job.declaration).header.status, Status::kOk);

  Client stranger(job.servers[0]->address(), 5);
  r = stranger.call(stranger.sliceHeader(Type::kPull, 0));
  EXPECT_EQ(r.header.status, Status::kError);
  EXPECT_NE(r.text().find("the job has 2 workers"), std::string::npos) << r.text();
  EXPECT_EQ(job.servers[0]->stats().refusedConnections, 0u);
}

// Workers whose parameters have the same sizes but other shapes (one transposed) train different
// models on the same numbers: the declaration carries the shapes, and the server refuses them.
TEST(PsServer, AParameterOfTheSameSizeAndAnotherShapeIsRefused) {
  TableSpec spec = specOf({6, 4});
  spec.shapes = {{2, 3}, {4}};
  Job job(1, 2, spec);
  auto first = job.worker(0, 0);
  Client second(job.servers[0]->address(), 1);
  Declaration other = job.declaration;
  other.spec.shapes = {{3, 2}, {4}};
  const Response r = second.declare(other);
  EXPECT_EQ(r.header.status, Status::kError);
  EXPECT_NE(r.text().find("worker 1 declared key 0 with shape [3, 2], the table has [2, 3]"),
            std::string::npos)
      << r.text();
  EXPECT_EQ(second.declare(job.declaration).header.status, Status::kOk);
  // A worker that gives no shapes is not compared on them.
  Client third(job.servers[0]->address(), 1);
  other.spec.shapes.clear();
  EXPECT_EQ(third.declare(other).header.status, Status::kOk);
  // A shape that does not hold its key's elements, or shapes for some keys only, never leave:
  // refused when encoded, and when decoded from bytes that say so.
  other.spec.shapes = {{2, 2}, {4}};
  EXPECT_THROW(encodeDeclaration(other), InvalidArgument);
  other.spec.shapes = {{2, 3}, {4}};
  std::vector<std::uint8_t> bytes = encodeDeclaration(other);
  bytes[bytes.size() - 8 - 4 - 8] = 2;  // key 0's second dimension: 3 -> 2 (little-endian i64)
  EXPECT_THROW(decodeDeclaration(bytes), ProtocolError);
  other.spec.shapes = {{2, 3}};
  EXPECT_THROW(encodeDeclaration(other), InvalidArgument);
  other.spec.shapes = {{2, 3}, {4}};
  EXPECT_EQ(decodeDeclaration(encodeDeclaration(other)), other);
}

TEST(PsServer, MalformedMessagesCloseTheConnection) {
  Job job(1, 1, specOf({4}));
  const std::string address = job.servers[0]->address();
  auto good = job.worker(0, 0);
  std::uint64_t refused = 0;
  auto expectRefused = [&](int fd) {
    expectClosedByServer(fd);
    EXPECT_TRUE(waitForRefused(*job.servers[0], ++refused));
  };
  {  // garbage instead of a header
    net::Fd fd = authenticatedSocket(address);
    const std::string junk(kHeaderBytes, 'x');
    net::writeAll(fd.get(), junk.data(), junk.size(), Deadline::after(seconds(5)));
    expectRefused(fd.get());
  }
  {  // a first message that is not a hello
    net::Fd fd = authenticatedSocket(address);
    Header h;
    h.type = Type::kStats;
    std::uint8_t head[kHeaderBytes];
    encodeHeader(h, head);
    net::writeAll(fd.get(), head, kHeaderBytes, Deadline::after(seconds(5)));
    expectRefused(fd.get());
  }
  auto sendOn = [&](Client& c, Header h, std::uint64_t payloadBytes) {
    h.payloadBytes = payloadBytes;
    std::uint8_t head[kHeaderBytes];
    encodeHeader(h, head);
    net::writeAll(c.fd(), head, kHeaderBytes, Deadline::after(seconds(5)));
  };
  {  // an oversized push: refused before its payload is read
    auto c = job.worker(0, 0);
    sendOn(*c, c->sliceHeader(Type::kPush, 0), std::uint64_t{1} << 40);
    expectRefused(c->fd());
  }
  {  // an oversized declaration
    Client c(address, 0);
    Header h;
    h.type = Type::kDeclare;
    sendOn(c, h, kMaxDeclarationBytes + 1);
    expectRefused(c.fd());
  }
  {  // a pull with a payload
    Client c(address, 0);
    sendOn(c, c.sliceHeader(Type::kPull, 0), 4);
    expectRefused(c.fd());
  }
  {  // a response bit in a request
    Client c(address, 0);
    Header h;
    h.type = Type::kStats;
    h.response = true;
    sendOn(c, h, 0);
    expectRefused(c.fd());
  }
  {  // a replicated update from a worker
    Client c(address, 0);
    Header h = c.sliceHeader(Type::kReplicate, 0, 1);
    h.worker = 1;
    sendOn(c, h, 4 * sizeof(float) + kContributorBytes);
    expectRefused(c.fd());
  }
  {  // a bad magic after a good hello
    Client c(address, 0);
    std::uint8_t head[kHeaderBytes];
    Header h;
    h.type = Type::kStats;
    encodeHeader(h, head);
    head[0] ^= 0xff;
    net::writeAll(c.fd(), head, kHeaderBytes, Deadline::after(seconds(5)));
    expectRefused(c.fd());
  }
  ASSERT_EQ(good->init(0, {1, 2, 3, 4}).header.status, Status::kOk);
  EXPECT_EQ(good->pullValues(0), (std::vector<float>{1, 2, 3, 4}));  // good clients are served throughout
  EXPECT_EQ(job.servers[0]->stats().refusedConnections, refused);
}

TEST(PsServer, ClientWithoutTheSecretIsRefused) {
  auto server = Server::start(serverOptions(0, 1));
  const auto [host, port] = net::splitHostPort(server->address());
  net::Fd fd = net::connectTo(host, port, Deadline::after(seconds(5)));
  EXPECT_THROW(
      auth::handshakeAsClient(fd.get(), "not-the-secret", kPsAuthContext, Deadline::after(seconds(5))),
      Error);
  fd.reset();
  EXPECT_TRUE(waitForRefused(*server, 1));
}

// A parameter server once gave every pending connection a thread (300 idle connections, 307
// threads). Now a flood costs no thread, and workers are served through it.
TEST(PsServer, AFloodOfIdleConnectionsCostsNoThreadsAndWorkersGetIn) {
  auto server = Server::start(serverOptions(0, 1));
  const int threadsBefore = test::threadCount();
  test::Flood flood(server->address(), {.idle = 300, .slow = 50, .garbage = 20});
  EXPECT_LE(test::threadCount(), threadsBefore + 2);
  const auto [host, port] = net::splitHostPort(server->address());
  const auto begin = std::chrono::steady_clock::now();
  net::Fd fd =
      auth::connectAuthenticated(host, port, kServerTestSecret, kPsAuthContext, Deadline::after(seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, seconds(2));
  EXPECT_TRUE(waitForRefused(*server, 20));
}

TEST(PsServer, SspClockWaitsForTheSlowest) {
  Job job(1, 2, specOf({1}, "ssp:1"));
  auto w0 = job.worker(0, 0);
  auto w1 = job.worker(0, 1);
  Header clock = w0->sliceHeader(Type::kClock, 0, 1);
  Response r = w0->call(clock);  // 1 - 1 <= 0: at once
  EXPECT_EQ(r.header.status, Status::kOk);
  EXPECT_EQ(r.header.a, 0);
  clock.a = 2;
  w0->send(clock);
  EXPECT_FALSE(w0->answered(milliseconds(150)));  // worker 1 is still at clock 0
  EXPECT_EQ(w1->call(w1->sliceHeader(Type::kClock, 0, 1)).header.a, 1);
  r = w0->receive();
  EXPECT_EQ(r.header.status, Status::kOk);
  EXPECT_EQ(r.header.a, 1);
}

// Pushes with momentum on every slice through its primary; returns the workers.
std::vector<std::unique_ptr<Client>> trainOnPrimaries(Job& job, int steps) {
  std::vector<std::unique_ptr<Client>> to;
  for (std::size_t s = 0; s < job.servers.size(); ++s) to.push_back(job.worker(static_cast<int>(s), 0));
  for (const Slice& slice : job.plan.slices) {
    auto& c = *to[static_cast<std::size_t>(slice.primary)];
    EXPECT_EQ(c.init(slice.id, iota(slice.length, 1.0f)).header.status, Status::kOk);
    for (int step = 0; step < steps; ++step) {
      const Response r =
          c.push(slice.id, step, step, 0.1f, iota(slice.length, 0.3f * static_cast<float>(step)));
      EXPECT_EQ(r.header.status, Status::kOk) << r.text();
      EXPECT_EQ(r.header.a, step + 1);
    }
  }
  return to;
}

TEST(PsServer, BackupHoldsIdenticalParameters) {
  Job job(2, 1, specOf({5, 7}, "asp", 0.9f));
  auto to = trainOnPrimaries(job, 4);
  std::vector<std::vector<float>> primary;
  for (const Slice& slice : job.plan.slices)
    primary.push_back(to[static_cast<std::size_t>(slice.primary)]->pullValues(slice.id));
  EXPECT_GT(job.servers[1]->stats().replicated, 0u);
  EXPECT_GT(job.servers[0]->stats().replicated, 0u);
  // The backups take over (a worker's request promotes the slice) with identical values,
  // versions and optimizer state.
  for (const Slice& slice : job.plan.slices) {
    auto& backup = *to[static_cast<std::size_t>(slice.backup)];
    const Response r = backup.pull(slice.id);
    EXPECT_EQ(r.header.a, 4);
    EXPECT_EQ(r.floats(), primary[static_cast<std::size_t>(slice.id)]) << "slice " << slice.id;
    EXPECT_EQ(backup.push(slice.id, 3, 4, 0.1f, iota(slice.length, 0)).header.a,
              4);  // a resend: not reapplied
    EXPECT_EQ(backup.push(slice.id, 4, 4, 0.1f, iota(slice.length, 0)).header.a, 5);
  }
}

TEST(PsServer, KilledBackupDoesNotBlockPushes) {
  Job job(2, 1, specOf({8}, "asp"));
  auto to = trainOnPrimaries(job, 1);  // the backup links are connected
  const Slice& mine = job.plan.slices[0];
  ASSERT_EQ(mine.primary, 0);
  to.pop_back();
  job.servers.pop_back();  // server 1 dies
  const auto start = Clock::now();
  for (int step = 1; step < 4; ++step) {
    const Response r = to[0]->push(mine.id, step, step, 0.1f, iota(mine.length, 0));
    EXPECT_EQ(r.header.status, Status::kOk) << r.text();
    EXPECT_EQ(r.header.a, step + 1);
  }
  EXPECT_LT(Clock::now() - start, seconds(3));
}

TEST(PsServer, UnreachableBackupIsGivenUp) {
  Job job(2, 1, specOf({8}, "asp"), milliseconds(300));
  auto c = job.worker(0, 0);
  job.worker(1, 0);  // server 1 knows the table, then dies before server 0 first needs it
  job.servers.pop_back();
  ASSERT_EQ(c->init(0, iota(4, 0)).header.status, Status::kOk);  // after the connect gave up
  const auto start = Clock::now();
  EXPECT_EQ(c->push(0, 0, 0, 1.0f, iota(4, 0)).header.a, 1);
  EXPECT_LT(Clock::now() - start, milliseconds(250));  // no second attempt
}

TEST(PsServer, ConcurrentWorkersOnReplicatedShards) {
  constexpr std::uint32_t kWorkers = 4;
  constexpr int kSteps = 25;
  Job job(2, kWorkers, specOf({40, 24}, "asp"));
  { auto init = trainOnPrimaries(job, 0); }
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&job, w] {
      std::vector<std::unique_ptr<Client>> to;
      for (int s = 0; s < 2; ++s) to.push_back(job.worker(s, w));
      for (int step = 0; step < kSteps; ++step) {
        for (const Slice& slice : job.plan.slices) {
          const Response r = to[static_cast<std::size_t>(slice.primary)]->push(
              slice.id, step, 0, 1.0f, std::vector<float>(slice.length, 1.0f));
          EXPECT_EQ(r.header.status, Status::kOk) << r.text();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Client>> to;
  for (int s = 0; s < 2; ++s) to.push_back(job.worker(s, 0));
  for (const Slice& slice : job.plan.slices) {
    // Every push subtracts 1/4: exact in float, so the order of the pushes does not matter.
    std::vector<float> expected = iota(slice.length, 1.0f - kWorkers * kSteps / 4.0f);
    const Response r = to[static_cast<std::size_t>(slice.primary)]->pull(slice.id);
    EXPECT_EQ(r.header.a, kWorkers * kSteps);
    EXPECT_EQ(r.floats(), expected) << "slice " << slice.id;
    EXPECT_EQ(to[static_cast<std::size_t>(slice.backup)]->pullValues(slice.id), expected)
        << "slice " << slice.id;
  }
  EXPECT_EQ(job.servers[0]->stats().updates + job.servers[1]->stats().updates,
            job.plan.slices.size() * kWorkers * kSteps);
  // A request still parked when the servers shut down does not hold them up.
  to[0]->send(to[0]->sliceHeader(Type::kPull, 0, 1000));
}

TEST(PsServer, ParkedRequestsTimeOut) {
  Job job(1, 2, specOf({2}, "bsp"), milliseconds(200));
  auto w0 = job.worker(0, 0);
  ASSERT_EQ(w0->init(0, {0, 0}).header.status, Status::kOk);
  const auto start = Clock::now();
  Response r = w0->pull(0, 5);
  EXPECT_EQ(r.header.status, Status::kTimeout);
  EXPECT_NE(r.text().find("waited 0.2 s for version 5"), std::string::npos) << r.text();
  EXPECT_LT(Clock::now() - start, seconds(2));
  r = w0->push(0, 0, 0, 1.0f, {1, 1});
  EXPECT_EQ(r.header.status, Status::kTimeout);
  EXPECT_NE(r.text().find("for step 0: workers 1 have not pushed"), std::string::npos) << r.text();
}

}  // namespace
}  // namespace gyre::ps
