// A real HTTP client for the serving tests: one request through Python's http.client.
#pragma once

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "support/jobs.h"
#include "support/programs.h"

namespace gyre::serve {

struct Reply {
  int status = 0;
  std::string body;
  std::string shape;  // X-Gyre-Shape
};

// One request through Python's http.client; the body goes through a file (it may be binary).
inline Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                     const std::string& contentType = "application/json", const std::string& shape = "") {
  test::TempDir dir;
  const std::string in = dir.path() + "/in", out = dir.path() + "/out";
  std::ofstream(in, std::ios::binary) << body;
  const std::string code =
      "import http.client, sys\n"
      "port, method, path, src, dst, ctype, shape = sys.argv[1:8]\n"
      "c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=30)\n"
      "headers = {'Content-Type': ctype}\n"
      "if shape: headers['X-Gyre-Shape'] = shape\n"
      "data = open(src, 'rb').read() if method == 'POST' else None\n"
      "c.request(method, path, body=data, headers=headers)\n"
      "r = c.getresponse()\n"
      "open(dst, 'wb').write(r.read())\n"
      "print(r.status, r.getheader('X-Gyre-Shape') or '')\n";
  const test::ProgramRun r = test::runProgram(
      {{"/usr/bin/python3", "-c", code, std::to_string(port), method, path, in, out, contentType, shape},
       test::cleanEnvironment()},
      std::chrono::seconds(60));
  Reply reply;
  if (r.exitCode != 0) {
    reply.body = r.describe();
    return reply;
  }
  std::istringstream words(r.out);
  words >> reply.status >> reply.shape;
  reply.body = test::readFile(out);
  return reply;
}

// A closed-loop load through Python's http.client: `clients` keep-alive clients post one row of
// 784 pixels to MODEL for `seconds`; with killPid > 0, that process is SIGKILLed `killAfterS` in.
struct LoadCounts {
  int answered = 0;  // every answer
  int failed = -1;   // those that were not 200
  std::string output;
};

inline LoadCounts closedLoad(int port, const std::string& model, int clients, double seconds, int killPid = 0,
                             double killAfterS = 1) {
  const std::string code =
      "import http.client, json, os, signal, sys, threading, time\n"
      "port, model, clients, seconds, victim, kill_after = sys.argv[1:7]\n"
      "body = json.dumps({'instances': [[0.5] * 784]}); codes = []; end = time.time() + float(seconds)\n"
      "def client():\n"
      "  c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=30)\n"
      "  while time.time() < end:\n"
      "    c.request('POST', f'/v1/models/{model}:predict', body=body, headers={'Content-Type': 'application/json'})\n"
      "    r = c.getresponse(); r.read(); codes.append(r.status)\n"
      "ts = [threading.Thread(target=client) for _ in range(int(clients))]\n"
      "[t.start() for t in ts]\n"
      "if int(victim) > 0: time.sleep(float(kill_after)); os.kill(int(victim), signal.SIGKILL)\n"
      "[t.join() for t in ts]\n"
      "print(len(codes), sum(1 for x in codes if x != 200))\n";
  const test::ProgramRun r = test::runProgram(
      {{"/usr/bin/python3", "-c", code, std::to_string(port), model, std::to_string(clients), std::to_string(seconds),
        std::to_string(killPid), std::to_string(killAfterS)},
       test::cleanEnvironment()},
      std::chrono::seconds(60) + std::chrono::seconds(static_cast<int>(seconds)));
  LoadCounts counts;
  counts.output = r.describe() + r.err;
  if (r.exitCode != 0) return counts;
  std::istringstream words(r.out);
  words >> counts.answered >> counts.failed;
  return counts;
}

}  // namespace gyre::serve
