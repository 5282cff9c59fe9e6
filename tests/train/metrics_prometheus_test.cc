// --metrics-port under a real Prometheus (Debian's package, tests/prometheus/prometheus.sh): it
// scrapes worker 0 of a gyre train job every second, and its HTTP query API then holds the job's
// samples/s series with a point for every scrape interval while the job trained, each rank's step
// time and the collectives' bytes by algorithm. Also: a port in use stops gyre train before it
// starts anything.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.h"
#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre::train::cli {
namespace {

using Json = nlohmann::json;

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A query of Prometheus's HTTP API (instant, at `time`), through Python's standard library.
Json query(int port, const std::string& promql, double time) {
  const std::string code =
      "import json, sys, urllib.parse, urllib.request\n"
      "q = urllib.parse.urlencode({'query': sys.argv[2], 'time': sys.argv[3]})\n"
      "print(urllib.request.urlopen('http://127.0.0.1:' + sys.argv[1] + '/api/v1/query?' + q, "
      "timeout=10).read()"
      ".decode())\n";
  const test::ProgramRun r =
      test::runProgram({{"/usr/bin/python3", "-c", code, std::to_string(port), promql, std::to_string(time)},
                        test::cleanEnvironment()},
                       std::chrono::seconds(30));
  if (r.exitCode != 0) return Json{{"error", r.describe()}};
  return Json::parse(r.out, nullptr, false);
}

class MetricsPrometheus : public TrainerTest {
 protected:
  void SetUp() override {
    TrainerTest::SetUp();
    if (IsSkipped()) return;
    if (!haveData()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  void TearDown() override {
    if (started_)
      test::runProgram({{"/bin/bash", prometheusScript(), "stop", path("prom")}, test::cleanEnvironment()},
                       std::chrono::seconds(30));
  }
  static std::string prometheusScript() { return test::sourceDir() + "/tests/prometheus/prometheus.sh"; }
  bool started_ = false;
};

TEST_F(MetricsPrometheus, PrometheusGetsTheSeriesOfATrainingJobAtEveryScrape) {
  const int metricsPort = test::freePort();
  const test::ProgramRun start = test::runProgram(
      {{"/bin/bash", prometheusScript(), "start", path("prom"), "127.0.0.1:" + std::to_string(metricsPort)},
       test::cleanEnvironment()},
      std::chrono::seconds(300));
  if (start.exitCode == 77) GTEST_SKIP() << "Prometheus cannot be installed here: " << start.err;
  ASSERT_EQ(start.exitCode, 0) << start.describe();
  started_ = true;
  const int promPort = std::stoi(start.out);

  const test::ProgramRun run = test::runProgram(
      {{gyreTool(), "train", "--model", "mlp", "--np", "2", "--epochs", "3", "--threads", "1",
        "--metrics-port", std::to_string(metricsPort), "--run-dir", path("run"), "--progress", "off"},
       test::cleanEnvironment()},
      std::chrono::seconds(600));
  const double ended = unixNow();
  ASSERT_EQ(run.exitCode, 0) << run.describe();

  // The raw samples of the series over the job: one a second, from the first scrape after the
  // worker started serving to the last before it stopped.
  const Json samples = query(promPort, "gyre_train_samples_per_second[10m]", ended + 1);
  ASSERT_EQ(samples.value("status", ""), "success") << samples.dump();
  ASSERT_EQ(samples["data"]["result"].size(), 1u) << samples.dump();
  const Json& values = samples["data"]["result"][0]["values"];
  ASSERT_GE(values.size(), 3u) << samples.dump();
  double positive = 0, widest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    positive = std::max(positive, std::stod(values[i][1].get<std::string>()));
    if (i > 0) widest = std::max(widest, values[i][0].get<double>() - values[i - 1][0].get<double>());
  }
  EXPECT_GT(positive, 0) << samples.dump();
  // A scrape that times out on a loaded 2-core machine leaves one interval empty; two in a row would
  // mean the endpoint stalls.
  EXPECT_LE(widest, 2.5) << "scrape intervals without a point: " << samples.dump();
  // The training: from the first step's time to the last's (progress.jsonl). A point in every
  // scrape interval of it (and a little slack at its ends, where a scrape may just miss it).
  const auto progress = jsonLines(path("run") + "/progress.jsonl");
  double firstStep = 0, lastStep = 0;
  for (const Json& j : progress) {
    if (!j.contains("time")) continue;
    if (firstStep == 0) firstStep = j.at("time").get<double>();
    lastStep = j.at("time").get<double>();
  }
  ASSERT_GT(lastStep - firstStep, 3.0) << "too short a training to judge";
  const double first = values[0][0].get<double>(), last = values[values.size() - 1][0].get<double>();
  EXPECT_LE(first, firstStep + 1.5) << "the first point came " << first - firstStep << " s into the training";
  EXPECT_GE(last, lastStep - 1.5) << "the last point came " << lastStep - last
                                  << " s before the training's end";
  std::size_t during = 0;
  for (const Json& v : values) during += v[0].get<double>() >= firstStep && v[0].get<double>() <= lastStep;
  EXPECT_GE(static_cast<double>(during), std::floor(0.8 * (lastStep - firstStep))) << samples.dump();

  const Json ranks = query(promPort, "gyre_train_rank_step_seconds", last);
  EXPECT_EQ(ranks["data"]["result"].size(), 2u) << ranks.dump();
  const Json bytes = query(promPort, "gyre_collective_bytes_total{op=\"allreduce\"}", last);
  ASSERT_GE(bytes["data"]["result"].size(), 1u) << bytes.dump();
  EXPECT_FALSE(bytes["data"]["result"][0]["metric"].value("algorithm", "").empty()) << bytes.dump();
  const Json epoch = query(promPort, "gyre_train_epoch", last);
  ASSERT_EQ(epoch["data"]["result"].size(), 1u) << epoch.dump();
  EXPECT_GE(std::stoi(epoch["data"]["result"][0]["value"][1].get<std::string>()), 2) << epoch.dump();
}

TEST_F(MetricsPrometheus, APortInUseStopsGyreTrainBeforeItStarts) {
  const int port = test::freePort();
  const std::string hold =
      "import socket, subprocess, sys\n"
      "s = socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
      "r = subprocess.run(sys.argv[2:], capture_output=True, text=True)\n"
      "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); sys.exit(r.returncode)\n";
  const test::ProgramRun run = test::runProgram(
      {{"/usr/bin/python3", "-c", hold, std::to_string(port), gyreTool(), "train", "--model", "mlp",
        "--metrics-port", std::to_string(port), "--run-dir", path("busy"), "--progress", "off"},
       test::cleanEnvironment()},
      std::chrono::seconds(120));
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_NE(run.err.find("--metrics-port " + std::to_string(port) +
                         ": cannot listen on 0.0.0.0:" + std::to_string(port) + ": Address already in use"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(path("busy"))) << "the run directory was made before the check";
}

}  // namespace
}  // namespace gyre::train::cli
