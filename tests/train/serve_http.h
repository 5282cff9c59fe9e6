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

}  // namespace gyre::serve
