// gyre run --metrics-port as Prometheus sees it: while a job with two parameter servers runs, the
// launcher serves its workers and generation on the port and each server its own figures on
// PORT + 1 + index; a port in use stops gyre run before any worker starts. The launcher's
// figures through restarts: tests/unit/run_metrics_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

// Starts argv[3:] and, while it runs, fetches http://127.0.0.1:PORT/metrics for each port of
// argv[1] (comma-separated) until the launcher's says 2 workers run and each server's has its
// updates; prints each port's last text
// after a "== PORT" line, then the job's exit code as "exit N".
constexpr const char* kScraper = R"(
import subprocess, sys, time, urllib.request
ports = sys.argv[1].split(',')
job = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
got = {}
while job.poll() is None and len(got) < len(ports):
    for p in ports:
        if p in got:
            continue
        try:
            text = urllib.request.urlopen('http://127.0.0.1:' + p + '/metrics', timeout=2).read().decode()
            if 'gyre_run_workers 2\n' in text or 'gyre_ps_server_updates_total' in text:
                got[p] = text
        except Exception:
            pass
    time.sleep(0.05)
for p in ports:
    print('== ' + p)
    print(got.get(p, ''))
print('exit', job.wait())
)";

TEST(GyreRunMetrics, TheLauncherAndEachParameterServerServeTheirFigures) {
  const test::ProgramRun port = test::runProgram(
      {{"/usr/bin/python3", "-c",
        "import socket\nfor _ in range(50):\n  s = [socket.socket() for _ in range(4)]\n  p = "
        "s[0].bind(('0.0.0.0', 0)) or s[0].getsockname()[1]\n  try:\n    [x.bind(('0.0.0.0', p + i)) for i, "
        "x in "
        "enumerate(s) if i]\n    print(p); break\n  except (OSError, OverflowError):\n    pass\n"},
       test::cleanEnvironment()},
      std::chrono::seconds(30));
  ASSERT_FALSE(port.out.empty()) << "no 4 free ports in a row: " << port.describe();
  const int p = std::stoi(port.out);
  const std::string ports = std::to_string(p) + "," + std::to_string(p + 1) + "," + std::to_string(p + 2);
  const test::ProgramRun run = test::runProgram(
      {{"/usr/bin/python3", "-c", kScraper, ports, test::gyreTool(), "run", "-np", "2", "--servers", "2",
        "--metrics-port", std::to_string(p), "--", test::binDir() + "/gyre_ps_check", "150", "20"},
       test::cleanEnvironment()},
      std::chrono::seconds(120));
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.out.find("exit 0"), std::string::npos) << run.out;
  const auto section = [&](int at) {
    const std::string head = "== " + std::to_string(at) + "\n";
    const std::size_t from = run.out.find(head);
    if (from == std::string::npos) return std::string();
    const std::size_t to = run.out.find("== ", from + head.size());
    return run.out.substr(from + head.size(),
                          to == std::string::npos ? std::string::npos : to - from - head.size());
  };
  const std::string launcher = section(p);
  EXPECT_NE(launcher.find("# TYPE gyre_run_workers gauge\ngyre_run_workers 2\n"), std::string::npos)
      << run.out;
  EXPECT_NE(launcher.find("gyre_run_generation 0\n"), std::string::npos) << launcher;
  EXPECT_NE(launcher.find("gyre_run_worker_exits_total{outcome=\"failed\"} 0\n"), std::string::npos)
      << launcher;
  for (int server : {0, 1}) {
    const std::string text = section(p + 1 + server);
    const std::string label = "{server=\"" + std::to_string(server) + "\"";
    EXPECT_NE(text.find("gyre_ps_server_updates_total" + label), std::string::npos) << run.out;
    EXPECT_NE(text.find("gyre_ps_server_bytes_total" + label + ",direction=\"in\"}"), std::string::npos)
        << text;
    EXPECT_NE(text.find("gyre_ps_server_staleness_bucket" + label + ",le=\"+Inf\"}"), std::string::npos)
        << text;
  }
}

TEST(GyreRunMetrics, APortInUseStopsGyreRunBeforeAnyWorkerStarts) {
  test::TempDir dir;
  const std::string marker = dir.path() + "/started";
  const std::string hold =
      "import socket, subprocess, sys\n"
      "s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(); port = str(s.getsockname()[1])\n"
      "r = subprocess.run([a.replace('PORT', port) for a in sys.argv[1:]], capture_output=True, text=True)\n"
      "sys.stdout.write(port + '\\n'); sys.stderr.write(r.stderr); sys.exit(r.returncode)\n";
  const test::ProgramRun run = test::runProgram({{"/usr/bin/python3", "-c", hold, test::gyreTool(), "run",
                                                  "--metrics-port", "PORT", "--", "/usr/bin/touch", marker},
                                                 test::cleanEnvironment()},
                                                std::chrono::seconds(60));
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  const std::string port = run.out.substr(0, run.out.find('\n'));
  EXPECT_NE(run.err.find("--metrics-port " + port + ": cannot listen on 0.0.0.0:" + port +
                         ": Address already in use"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a worker ran";
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
