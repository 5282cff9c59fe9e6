// `gyre serve` as a user runs it: a model gyre train saved, behind a real server on loopback,
// driven by a real HTTP client (Python's http.client): its predictions are the model's own forward
// pass bit for bit, every bad request gets a 4xx naming the problem while the server goes on, a
// slow client is dropped, and SIGTERM ends it after the accepted requests. Skipped in a build
// without gyre_serve_worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "serve_http.h"
#include "torch/compute_threads.h"
#include "train/models.h"

namespace gyre::serve {
namespace {

using nlohmann::json;
using test::contains;

std::string serveWorker() {
  return test::binDir() + "/gyre_serve_worker";
}

// A server of `dir`'s model on a free port, up until the test ends (then SIGTERM).
class Server {
 public:
  Server(const std::string& model, std::vector<std::string> flags) : port_(test::freePort()) {
    std::vector<std::string> argv = {test::gyreTool(), "serve", model, "--port", std::to_string(port_)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    run_ = test::startProgram({argv, test::cleanEnvironment()}, std::chrono::seconds(300));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until &&
           run_.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      if (request(port_, "GET", "/readyz").status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~Server() {
    if (run_.valid()) stop();
  }
  int port() const { return port_; }
  bool up() { return run_.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready; }
  // SIGTERM to the server, and what it printed.
  test::ProgramRun stop() {
    for (const std::string& p : test::processesWith("gyre_serve_worker"))
      if (contains(p, "--port " + std::to_string(port_))) ::kill(std::stoi(p), SIGTERM);
    return run_.get();
  }

 private:
  int port_;
  std::future<test::ProgramRun> run_;
};

class ServeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(serveWorker().c_str(), X_OK) != 0) GTEST_SKIP() << "no " << serveWorker() << " in this build";
  }
  // A run directory as gyre train leaves it: model.pt and config.json of a seeded `model`.
  std::string runDir(const std::string& model) {
    const std::string dir = dir_.path() + "/" + model;
    std::filesystem::create_directories(dir);
    ::torch::manual_seed(7);
    ::torch::nn::Sequential net = train::makeModel(model);
    ::torch::save(net, dir + "/model.pt");
    std::ofstream(dir + "/config.json") << json{{"model", model}, {"sync_bn", false}}.dump();
    return dir;
  }
  // What the cnn saved in `dir` answers for `x`, computed as the server does with --threads 1.
  static ::torch::Tensor ownForward(const std::string& dir, const ::torch::Tensor& x) {
    ::torch::nn::Sequential net = train::makeModel("cnn");
    ::torch::load(net, dir + "/model.pt");
    net->eval();
    gyre::torch::setComputeThreads(1);
    return net->forward(x).detach();
  }
  test::TempDir dir_;
};

TEST_F(ServeCli, PredictionsAreTheModelsOwnForwardPassBitForBitInEachWireFormat) {
  const std::string dir = runDir("cnn");
  Server server(dir, {"--threads", "1", "--max-batch-size", "8"});
  ASSERT_TRUE(server.up());
  ::torch::manual_seed(3);
  const ::torch::Tensor x = ::torch::rand({3, 1, 28, 28});
  const ::torch::Tensor want = ownForward(dir, x);

  json instances = json::array();
  for (int i = 0; i < 3; ++i) {
    const ::torch::Tensor row = x[i].flatten().contiguous();
    instances.push_back(std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + row.numel()));
  }
  const Reply v1 = request(server.port(), "POST", "/v1/models/cnn:predict", json{{"instances", instances}}.dump());
  ASSERT_EQ(v1.status, 200) << v1.body;
  const json p = json::parse(v1.body)["predictions"];
  const json v2in = {{"inputs", {{{"name", "x"}, {"shape", {3, 1, 28, 28}}, {"datatype", "FP32"}, {"data", instances}}}}};
  const Reply v2 = request(server.port(), "POST", "/v2/models/cnn/infer", v2in.dump());
  ASSERT_EQ(v2.status, 200) << v2.body;
  const json q = json::parse(v2.body)["outputs"][0];
  EXPECT_EQ(q["shape"], json::array({3, 10}));
  const ::torch::Tensor xc = x.contiguous();
  const Reply raw = request(server.port(), "POST", "/v1/models/cnn:predict",
                            std::string(reinterpret_cast<const char*>(xc.data_ptr<float>()), xc.numel() * 4),
                            "application/octet-stream", "3,1,28,28");
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(raw.shape, "3,10");
  ASSERT_EQ(raw.body.size(), 30 * sizeof(float));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 10; ++j) {
      const float w = want[i][j].item<float>();
      EXPECT_EQ(p[i][j].get<float>(), w) << i << "," << j;
      EXPECT_EQ(q["data"][i * 10 + j].get<float>(), w) << i << "," << j;
      float r = 0;
      std::memcpy(&r, raw.body.data() + (i * 10 + j) * 4, 4);
      EXPECT_EQ(r, w) << i << "," << j;
    }
  const Reply status = request(server.port(), "GET", "/v1/models/cnn");
  EXPECT_EQ(status.status, 200);
  EXPECT_TRUE(contains(status.body, "\"ready\":true")) << status.body;
  const Reply metrics = request(server.port(), "GET", "/metrics");
  EXPECT_TRUE(contains(metrics.body, "gyre_serve_requests_total{code=\"200\"} 3")) << metrics.body;
  EXPECT_TRUE(contains(metrics.body, "gyre_serve_batch_rows_total 9")) << metrics.body;
  const test::ProgramRun end = server.stop();
  EXPECT_EQ(end.exitCode, 0) << end.describe();
  EXPECT_TRUE(contains(end.out, "gyre serve: cnn (cnn) on http://127.0.0.1:")) << end.out;
  EXPECT_TRUE(contains(end.err, "stopped by SIGTERM")) << end.err;
}

TEST_F(ServeCli, BadRequestsGetA4xxNamingTheProblemAndTheServerGoesOn) {
  Server server(runDir("mlp"), {"--max-body-bytes", "65536", "--read-timeout", "1"});
  ASSERT_TRUE(server.up());
  const int port = server.port();
  struct Case {
    std::string method, path, body, contentType, shape;
    int status;
    std::string says;
  };
  const std::string predict = "/v1/models/mlp:predict";
  const std::vector<Case> cases = {
      {"POST", predict, "{\"instances\": [", "application/json", "", 400, "the body is not JSON"},
      {"POST", predict, R"({"instances": [[1, 2, 3]]})", "application/json", "", 400, "this model takes 784"},
      {"POST", predict, R"({"instances": [[1, 2], [3]]})", "application/json", "", 400, "ragged"},
      {"POST", predict, R"({"rows": []})", "application/json", "", 400, "has no"},
      {"POST", "/v1/models/resnet:predict", R"({"instances": [[1]]})", "application/json", "", 404,
       "no model 'resnet' here; this server serves 'mlp'"},
      {"GET", "/v2/nothing", "", "", "", 404, "no such path"},
      {"POST", predict, std::string(70000, '1'), "application/json", "", 413, "larger than --max-body-bytes"},
      {"POST", predict, "abcd", "application/octet-stream", "", 400, "X-Gyre-Shape"},
      {"POST", predict, "abcd", "application/octet-stream", "2,784", 400, "takes 6272"},
      {"POST", "/v2/models/mlp/infer", R"({"inputs": [{"shape": [1, 784], "datatype": "BYTES", "data": [1]}]})",
       "application/json", "", 400, "datatype 'BYTES'"},
  };
  for (const Case& c : cases) {
    const Reply r = request(port, c.method, c.path, c.body, c.contentType, c.shape);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 60) << ": " << r.body;
    EXPECT_TRUE(contains(r.body, "\"error\"") && contains(r.body, c.says)) << r.body;
  }
  // A client that sends half a request and stalls is dropped after --read-timeout; meanwhile and
  // afterwards the server answers the others.
  const std::string slowloris =
      "import socket, sys, time\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      "s.sendall(b'POST /v1/models/mlp:predict HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 100\\r\\n\\r\\n{')\n"
      "s.settimeout(10)\n"
      "t = time.time(); data = s.recv(100)\n"
      "print('closed' if time.time() - t < 9 else 'held', data[:12])\n";
  auto slow = test::startProgram({{"/usr/bin/python3", "-c", slowloris, std::to_string(port)}, test::cleanEnvironment()},
                                 std::chrono::seconds(60));
  const json good = {{"instances", json::array({std::vector<float>(784, 0.5f)})}};
  EXPECT_EQ(request(port, "POST", predict, good.dump()).status, 200);
  const test::ProgramRun dropped = slow.get();
  EXPECT_TRUE(contains(dropped.out, "closed")) << dropped.describe() << dropped.out;
  EXPECT_EQ(request(port, "POST", predict, good.dump()).status, 200);
  EXPECT_TRUE(server.up());
}

TEST_F(ServeCli, ABadModelOrFlagIsRefusedClearly) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  std::filesystem::create_directories(dir_.path() + "/empty");
  std::ofstream(dir_.path() + "/junk.pt") << "not a model";
  const std::vector<Case> cases = {
      {{dir_.path() + "/nothing"}, 1, "no such file or directory"},
      {{dir_.path() + "/empty"}, 1, "holds no model.pt"},
      {{dir_.path() + "/junk.pt"}, 1, "cannot load"},
      {{dir_.path() + "/junk.pt", "--replica-processes", "--replicas", "2"}, 1, "cannot load"},
      {{runDir("mlp"), "--replicas", "0"}, 2, "--replicas must be between 1 and 256"},
      {{runDir("mlp"), "--port", "70000"}, 2, "--port 70000 is not a port"},
      {{runDir("mlp"), "--max-batch-size", "x"}, 2, "--max-batch-size"},
      {{runDir("mlp"), "--min-replicas", "2"}, 2, "--min-replicas and --max-replicas go together"},
      {{runDir("mlp"), "--min-replicas", "3", "--max-replicas", "2"}, 2, "autoscaling needs 1 <= --min-replicas"},
      {{}, 2, "model is required"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {test::gyreTool(), "serve"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const test::ProgramRun r = test::runProgram({argv, test::cleanEnvironment()}, std::chrono::seconds(60));
    EXPECT_EQ(r.exitCode, c.code) << r.describe();
    EXPECT_TRUE(contains(r.err, c.says)) << r.err;
  }
}

// Eight clients at once for two seconds on an unbatched server that may autoscale at once: a
// second replica starts, every request is answered, and once the load is gone the second leaves.
TEST_F(ServeCli, AutoscalingAddsAReplicaUnderLoadAndRemovesItAfter) {
  Server server(runDir("cnn"), {"--max-batch-size", "1", "--min-replicas", "1", "--max-replicas", "2",
                                "--upscale-delay", "0", "--downscale-delay", "0.5"});
  ASSERT_TRUE(server.up());
  const LoadCounts load = closedLoad(server.port(), "cnn", 8, 2);
  EXPECT_GT(load.answered, 16) << load.output;
  EXPECT_EQ(load.failed, 0) << load.output;
  // Idle: back to one replica after the 0.5 s delay.
  bool one = false;
  for (int i = 0; i < 100 && !one; ++i) {
    one = contains(request(server.port(), "GET", "/metrics").body, "\ngyre_serve_replicas 1\n");
    if (!one) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(one);
  const test::ProgramRun r = server.stop();
  EXPECT_TRUE(contains(r.out, "gyre serve: replicas 1 -> 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "gyre serve: replicas 2 -> 1")) << r.out;
}

// --max-connections 2 with two keep-alive connections held open: a third is answered 503 naming the
// limit, at once and before its body is read, and closed; once the two close, requests are served
// again, and /metrics counts the refusals.
TEST_F(ServeCli, ConnectionsBeyondTheLimitGetA503AndTheServerGoesOn) {
  Server server(runDir("mlp"), {"--max-connections", "2"});
  ASSERT_TRUE(server.up());
  const std::string code =
      "import http.client, json, sys, time\n"
      "port = int(sys.argv[1]); body = json.dumps({'instances': [[0.5] * 784]})\n"
      "def conn(): return http.client.HTTPConnection('127.0.0.1', port, timeout=30)\n"
      "held = []\n"
      "for _ in range(2):\n"
      "  c = conn(); c.request('GET', '/healthz'); c.getresponse().read(); held.append(c)\n"
      "c = conn(); c.request('POST', '/v1/models/mlp:predict', body=body, headers={'Content-Type': 'application/json'})\n"
      "r = c.getresponse(); print(r.status, r.getheader('Connection'), r.read().decode())\n"
      "[h.close() for h in held]\n"
      "for _ in range(200):\n"
      "  c = conn(); c.request('POST', '/v1/models/mlp:predict', body=body, headers={'Content-Type': 'application/json'})\n"
      "  r = c.getresponse(); r.read(); c.close()\n"
      "  if r.status == 200: break\n"
      "  time.sleep(0.01)\n"
      "print(r.status)\n"
      "c = conn(); c.request('GET', '/metrics'); m = c.getresponse().read().decode()\n"
      "print([l for l in m.splitlines() if l.startswith('gyre_serve_refused_connections_total')][0])\n";
  const test::ProgramRun r = test::runProgram(
      {{"/usr/bin/python3", "-c", code, std::to_string(server.port())}, test::cleanEnvironment()},
      std::chrono::seconds(60));
  ASSERT_EQ(r.exitCode, 0) << r.describe() << r.err;
  EXPECT_TRUE(contains(r.out, "503 close {\"error\":\"all --max-connections (2) connections are being served; try again\"}"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "\n200\n")) << r.out;
  EXPECT_FALSE(contains(r.out, "gyre_serve_refused_connections_total 0")) << r.out;
  EXPECT_EQ(server.stop().exitCode, 0);
}

// The process of `gyre serve --replica-processes` whose environment says it is `rank` of the job.
int replicaProcess(int port, int rank) {
  for (const std::string& p : test::processesWith("gyre_serve_worker")) {
    if (!contains(p, "--port " + std::to_string(port))) continue;
    const int pid = std::stoi(p);
    std::string environ = test::readFile("/proc/" + std::to_string(pid) + "/environ");
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (contains("\n" + environ, "\nGYRE_RANK=" + std::to_string(rank) + "\n")) return pid;
  }
  return -1;
}

// --replica-processes: each replica an actor in a process of its own. One SIGKILLed under load
// fails no request (its batch is answered by a replica rebuilt in a live process), and the
// answers are still the model's own forward pass, bit for bit.
TEST_F(ServeCli, AReplicaProcessKilledUnderLoadFailsNoRequest) {
  const std::string dir = runDir("cnn");
  Server server(dir, {"--threads", "1", "--replicas", "2", "--replica-processes", "--max-batch-size", "4"});
  ASSERT_TRUE(server.up());
  const int victim = replicaProcess(server.port(), 1);
  ASSERT_GT(victim, 0) << "no replica process of rank 1";
  const LoadCounts load = closedLoad(server.port(), "cnn", 8, 3, victim, 1);
  EXPECT_GT(load.answered, 16) << load.output;
  EXPECT_EQ(load.failed, 0) << load.output;
  EXPECT_EQ(replicaProcess(server.port(), 1), -1);  // it is gone, and the job went on

  ::torch::manual_seed(3);
  const ::torch::Tensor x = ::torch::rand({2, 1, 28, 28});
  const ::torch::Tensor want = ownForward(dir, x);
  const ::torch::Tensor xc = x.contiguous();
  const Reply raw = request(server.port(), "POST", "/v1/models/cnn:predict",
                            std::string(reinterpret_cast<const char*>(xc.data_ptr<float>()), xc.numel() * 4),
                            "application/octet-stream", "2,1,28,28");
  ASSERT_EQ(raw.status, 200) << raw.body;
  ASSERT_EQ(raw.body.size(), 20 * sizeof(float));
  for (int i = 0; i < 20; ++i) {
    float r = 0;
    std::memcpy(&r, raw.body.data() + i * 4, 4);
    EXPECT_EQ(r, want.flatten()[i].item<float>()) << i;
  }
  const test::ProgramRun end = server.stop();
  EXPECT_EQ(end.exitCode, 0) << end.describe();
  EXPECT_TRUE(contains(end.out, "replica processes (gyre::rt actors): ")) << end.out;
  EXPECT_TRUE(contains(end.out, "gyre serve: a replica's process (rank 1) was lost")) << end.out;
  EXPECT_TRUE(contains(end.out, "the replica was rebuilt in process")) << end.out;
  EXPECT_TRUE(contains(end.err, "stopped by SIGTERM")) << end.err;
  EXPECT_TRUE(test::processesWith("--port " + std::to_string(server.port())).empty());
}

}  // namespace
}  // namespace gyre::serve
