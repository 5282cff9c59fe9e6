// A trial for gyre tune's tests: "trains" a deterministic curve and reports it through
// gyre::tune::report, keeping its state in the trial's checkpoint directory as a real trial would.
//
//   gyre_tune_trial --x X [--y Y] [--iterations N] [--sleep-ms MS] [--fail-at K] [--always-fail]
//                   [--no-metric] [--tag WORD]
//
// Iteration i reports score = quality(x, y) x (1 - 0.5 / i) and loss = 1 - score, where quality
// peaks at x = 0.3, y = 2 and is the same for every iteration: the ranking of configurations
// never changes, so a scheduler that stops early loses nothing. The state (the iteration and a
// running sum) is saved in checkpoint_dir/state before each report and restored when
// startIteration() > 0 (a state newer than the start has its iteration reported again); a state
// older than the start iteration fails the run. --fail-at K exits 3
// after reporting iteration K the first time the trial gets there (a marker file in the trial
// directory remembers), --always-fail exits 4 at once.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gyre/tune.h"

namespace {

double quality(double x, double y) {
  return 1.0 / (1.0 + 4 * (x - 0.3) * (x - 0.3) + 0.05 * (y - 2) * (y - 2));
}

}  // namespace

int main(int argc, char** argv) {
  double x = 0, y = 2;
  int iterations = 1000000, sleepMs = 0, failAt = 0;
  bool alwaysFail = false, noMetric = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--x")
      x = std::atof(next().c_str());
    else if (a == "--y")
      y = std::atof(next().c_str());
    else if (a == "--iterations")
      iterations = std::atoi(next().c_str());
    else if (a == "--sleep-ms")
      sleepMs = std::atoi(next().c_str());
    else if (a == "--fail-at")
      failAt = std::atoi(next().c_str());
    else if (a == "--always-fail")
      alwaysFail = true;
    else if (a == "--no-metric")
      noMetric = true;
    else if (a == "--tag")
      next();  // marks the process as a test's, for finding it
    else {
      std::fprintf(stderr, "gyre_tune_trial: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (alwaysFail) {
    std::fprintf(stderr, "gyre_tune_trial: failing on purpose\n");
    return 4;
  }
  const std::string ckpt = gyre::tune::checkpointDir();
  const int start = gyre::tune::startIteration();
  double sum = 0;
  // Resume from the checkpoint, which may be newer than the last report the tuner recorded (saved,
  // then killed before reporting).
  int from = 0;
  if (start > 0) {
    std::ifstream in(ckpt + "/state");
    in >> from >> sum;
    if (from < start) {
      std::fprintf(stderr, "gyre_tune_trial: checkpoint holds iteration %d, asked to resume from %d\n", from,
                   start);
      return 5;
    }
  }
  const auto reportIteration = [&](int i, double score) {
    if (noMetric) {
      gyre::tune::report({{"other", score}}, i);
    } else {
      gyre::tune::report({{"score", score}, {"loss", 1 - score}, {"mean", sum / i}}, i);
    }
  };
  // A checkpoint newer than the tuner's: its iteration's report may never have been written.
  // Report it again (the tuner skips a result it has), so no iteration goes unreported.
  if (from > start) reportIteration(from, quality(x, y) * (1 - 0.5 / from));
  const int stop = gyre::tune::stopAt() > 0 ? gyre::tune::stopAt() : iterations;
  for (int i = from + 1; i <= stop && i <= iterations; ++i) {
    if (sleepMs > 0) usleep(static_cast<useconds_t>(sleepMs) * 1000);
    const double score = quality(x, y) * (1 - 0.5 / i);
    sum += score;
    if (!ckpt.empty()) {
      std::string cmd = "mkdir -p '" + ckpt + "'";
      if (std::system(cmd.c_str()) != 0) return 6;
      std::ofstream out(ckpt + "/state.tmp");
      out << i << " " << sum << "\n";
      out.close();
      std::rename((ckpt + "/state.tmp").c_str(), (ckpt + "/state").c_str());
    }
    reportIteration(i, score);
    const std::string marker = gyre::tune::trialDir() + "/failed-once";
    if (i == failAt && access(marker.c_str(), F_OK) != 0) {
      std::ofstream(marker) << "1\n";
      std::fprintf(stderr, "gyre_tune_trial: failing at iteration %d\n", i);
      return 3;
    }
  }
  return 0;
}
