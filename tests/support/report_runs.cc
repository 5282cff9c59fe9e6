#include "support/report_runs.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace gyre::test {

void writeFakeRun(const std::string& dir, const FakeRun& r) {
  std::filesystem::create_directories(dir);
  const double f = r.serialFraction, w = r.world;
  const double samplesPerS = 1000.0 / (f + (1 - f) / w);
  std::ofstream(dir + "/config.json")
      << "{\n  \"world\": " << r.world << ",\n  \"model\": \"mlp\",\n  \"batch\": 128\n}\n";
  std::ofstream metrics(dir + "/metrics.jsonl"), steps(dir + "/steps.jsonl"),
      progress(dir + "/progress.jsonl");
  metrics.precision(17);
  progress << "{\"generation\":0,\"start_step\":0}\n";
  int step = 0;
  double time = 1.8e9;
  for (int e = 1; e <= r.epochs; ++e) {
    const double seconds = r.stepsPerEpoch * 128 / samplesPerS;
    metrics << "{\"epoch\":" << e << ",\"world\":" << r.world << ",\"loss\":" << 1.0 / e
            << ",\"test_accuracy\":" << 0.7 + 0.05 * e << ",\"samples_per_s\":" << samplesPerS
            << ",\"seconds\":" << seconds << ",\"steps\":" << r.stepsPerEpoch
            << ",\"timed_steps\":" << r.stepsPerEpoch << ",\"compute_s\":" << seconds * 0.7
            << ",\"communicate_s\":" << seconds * 0.4 << ",\"hidden_s\":" << seconds * 0.1
            << ",\"wait_s\":" << seconds * 0.3 << ",\"data_wait_s\":" << seconds * 0.05 << ",\"mode\":\""
            << (r.parameterServer ? "async" : "allreduce")
            << "\",\"staleness\":" << (r.parameterServer ? "[40,30,20,10,0,0]" : "null") << "}\n";
    for (int s = 0; s < r.stepsPerEpoch; ++s) {
      ++step;
      time += seconds / r.stepsPerEpoch;
      steps << "{\"step\":" << step << ",\"epoch\":" << e << ",\"loss\":" << 2.0 / (1 + 0.05 * step)
            << ",\"lr\":0.05}\n";
      progress << "{\"generation\":0,\"step\":" << step << ",\"time\":" << std::to_string(time);
      if (r.world > 1) {
        progress << ",\"rank_ms\":[";
        for (int k = 0; k < r.world; ++k) progress << (k ? "," : "") << (k == r.straggler ? 30 : 10);
        progress << "]";
      }
      progress << "}\n";
    }
  }
}

}  // namespace gyre::test
