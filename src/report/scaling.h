// Scaling figures of runs at several worker counts (gyre report): speedup S(W) = throughput(W) /
// throughput(1), efficiency E(W) = S(W) / W, and Amdahl's law S(W) = 1 / (f + (1 - f) / W) fitted
// to the measured speedups by least squares on 1/S, which is linear in the serial fraction f:
// 1/S - 1/W = f (1 - 1/W). Pure functions.
#pragma once

#include <optional>
#include <vector>

namespace gyre::report {

struct ScalingPoint {
  int workers = 1;
  double samplesPerS = 0;
  double speedup = 0;
  double efficiency = 0;
};

struct Scaling {
  std::vector<ScalingPoint> points;      // by workers; the best throughput where a count repeats
  std::optional<double> serialFraction;  // Amdahl's f in [0, 1]; needs a point above 1 worker
};

// From (workers, samples/s) pairs; nullopt without a 1-worker point (speedup needs it).
std::optional<Scaling> scaling(const std::vector<std::pair<int, double>>& throughputs);

// Amdahl's speedup at W workers for serial fraction f.
double amdahl(double serialFraction, double workers);

}  // namespace gyre::report
